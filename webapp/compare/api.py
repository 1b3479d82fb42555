"""GET /api/compare: chart data for many runs in one request, scoped to the caller's runs.

?runs=3,7,12 (at most selection.MAX_RUNS) &keys=a,b or &key=a&key=b (default: every key the run
page charts)
&max_points=N (per run and key, downsampled like the run page; runs x keys x max_points at most
MAX_POINTS_PER_REQUEST) &bands=1 (add each bucket's min..max)
&group_by=<config field> (add the mean and min..max over each group's runs, aligned by step)
&clock=1 (add each run's seconds-per-step series over every step: the training-time axis).
Ids that do not exist or are not the caller's are left out and listed in `not_found` alike.
"""

import re

from diagnostics.metrics import CHART_KEYS
from diagnostics.quoting import quoted
from webapp.accounts.api_auth import ApiError, api_view, int_param
from webapp.alerts.models import DetectorEvent
from webapp.compare import aggregates, selection
from webapp.core.json_response import JsonResponse
from webapp.metrics.api import MAX_MAX_POINTS, requested_keys, run_state, step_range
from webapp.metrics.downsample import finite_or_none, load_clocks, load_many

DEFAULT_MAX_POINTS = 500
# Points one request may return (runs x keys x max_points): 100 runs x 14 chart keys x 1,000 points.
# The page asks for 2,000 points per chart in all (webapp.compare.views.page_points), far below.
MAX_POINTS_PER_REQUEST = 1_400_000


# The API's `runs` as its document writes it: ids without signs, leading zeros or empty places (the page
# takes what a person edits into its URL more loosely: selection.split_ids).
RUN_IDS = re.compile(r"[1-9][0-9]{0,17}(,[1-9][0-9]{0,17})*")


def parse_selection(request) -> selection.Selection:
    values = request.GET.getlist("runs")
    ids, invalid = selection.split_ids(values)
    if invalid:
        message = f"{quoted(invalid[0])} is not a run id; expected ids separated by commas, like runs=3,7,12"
        raise ApiError.field("runs", message)
    loose = next((value for value in values if not RUN_IDS.fullmatch(value)), None) if ids else None
    if loose is not None:
        message = (
            f"{quoted(loose)}: expected ids separated by commas, like runs=3,7,12 (no spaces, signs, "
            "leading zeros or empty places)"
        )
        raise ApiError.field("runs", message)
    if not ids:
        raise ApiError.field("runs", "name at least one run id, like runs=3,7,12")
    if len(ids) > selection.MAX_RUNS:
        message = f"at most {selection.MAX_RUNS} runs per request, got {len(ids)}"
        raise ApiError.field("runs", message)
    return selection.select(request.user, values)


@api_view(repeatable=("runs", "key"))
def compare(request):
    chosen = parse_selection(request)
    keys = requested_keys(request, CHART_KEYS)
    max_points = int_param(request, "max_points", DEFAULT_MAX_POINTS, low=2, high=MAX_MAX_POINTS)
    clock = _flag(request, "clock")
    series_per_run = len(keys) + clock  # a run's clock is one more series
    if len(chosen.requested) * series_per_run * max_points > MAX_POINTS_PER_REQUEST:
        message = (
            f"runs x keys x max_points is at most {MAX_POINTS_PER_REQUEST:,}, got "
            f"{len(chosen.requested)} x {series_per_run} x {max_points}: ask for fewer points"
        )
        raise ApiError.field("max_points", message)
    after, through = step_range(request)
    bands = _flag(request, "bands")
    group_by = request.GET.get("group_by", "").strip()
    if group_by and not aggregates.is_field(chosen.runs, group_by):
        message = f"{group_by[:100]!r} is not a config field of these runs (e.g. algorithm.filter_ratio)"
        raise ApiError.field("group_by", message)
    events = {run.pk: [] for run in chosen.runs}
    for run_id, *event in DetectorEvent.objects.filter(run__in=chosen.runs).values_list(
        "run_id", "step", "level", "rule", "message"
    ):
        events[run_id].append(dict(zip(("step", "level", "rule", "message"), event)))
    summaries = aggregates.summaries(chosen.runs)  # the runs table's columns, kept current while live
    body = {
        "runs": [
            {
                **run_state(run),
                "label": run.label,
                "experiment": run.experiment_id,
                "events": events[run.pk],
                "summary": {
                    key: finite_or_none(value) for key, value in summaries[run.pk].items() if key != "device"
                },
            }
            for run in chosen.runs
        ],
        "not_found": chosen.unavailable,
        "max_points": max_points,
        "after": after,
        "through": through,
    }
    loaded = load_many(chosen.ids, keys, after, max_points, through)
    body["series"] = {
        str(pk): {key: _series_json(s, bands) for key, s in series.items()} for pk, series in loaded.items()
    }
    if clock:  # over every step, whatever the range asked: minutes of training count from the start
        clock_keys = {run.pk: run.clock_key for run in chosen.runs}
        body["clocks"] = {
            str(pk): {"key": clock_keys[pk], **series.as_json()}
            for pk, series in load_clocks(clock_keys, max_points).items()
        }
    if group_by:
        body["group_by"] = group_by
        body["groups"] = [
            {
                **group,
                "series": aggregates.group_series([loaded[pk] for pk in group["runs"]], keys, max_points),
                "summary": aggregates.group_summary(group["runs"], summaries),
            }
            for group in aggregates.groups(chosen.runs, group_by)
        ]
    return JsonResponse(body)


def _flag(request, name: str) -> bool:
    """?name=0 or 1, 0 when left out."""
    value = request.GET.get(name, "0")
    if value not in ("0", "1"):
        raise ApiError.field(name, f"must be 0 or 1, got {value[:20]!r}")
    return value == "1"


def _series_json(series, bands: bool) -> dict:
    body = series.as_json()
    if not bands:
        body.pop("min", None)
        body.pop("max", None)
    return body
