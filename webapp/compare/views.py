"""The compare page (/compare?runs=3,7,12) and the one-click paper ablations."""

import colorsys
import re
from collections import defaultdict

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from diagnostics.metrics import CHART_KEYS, CHARTS
from diagnostics.quoting import quoted
from diagnostics.series import as_text_cell
from webapp.compare import ablations, aggregates, selection
from webapp.compare.forms import AblationForm
from webapp.core import chart_view
from webapp.core.converters import parse_id
from webapp.core.json_response import JsonResponse
from webapp.experiments import estimate
from webapp.metrics import export
from webapp.metrics.api import MAX_KEYS
from webapp.runs.charts import other_keys

# One colour per run, the same in every chart and table: plotly's D3 palette, then its light tones,
# then hues a golden angle apart (each new hue falls in the widest gap left), in two lightnesses.
NAMED_COLORS = [
    "#1f77b4",
    "#ff7f0e",
    "#2ca02c",
    "#d62728",
    "#9467bd",
    "#8c564b",
    "#e377c2",
    "#7f7f7f",
    "#bcbd22",
    "#17becf",
    "#aec7e8",
    "#ffbb78",
    "#98df8a",
    "#ff9896",
    "#c5b0d5",
    "#c49c94",
    "#f7b6d2",
    "#c7c7c7",
    "#dbdb8d",
    "#9edae5",
]


def golden_angle_colors(count: int) -> list[str]:
    out = []
    for i in range(count):
        red, green, blue = colorsys.hls_to_rgb((i * 0.381966) % 1.0, 0.42 if i % 2 else 0.58, 0.65)
        out.append(f"#{round(red * 255):02x}{round(green * 255):02x}{round(blue * 255):02x}")
    return out


COLORS = NAMED_COLORS + golden_angle_colors(selection.MAX_RUNS - len(NAMED_COLORS))
# Points per run and key the page asks for: the same total on screen whatever the number of runs
# (2 runs: 1000 each, like the run page; 20 runs: 100; 40 runs and more: 50), so many overlaid runs draw
# almost as fast as a few, and 50 points of a 10k-step run are read from its 100-step rollups instead
# of from every point. Each point's min..max band keeps a one-step spike in sight at any of these.
POINTS_ON_SCREEN, MIN_POINTS, MAX_POINTS = 2000, 50, 1000


def page_points(runs: int) -> int:
    return max(MIN_POINTS, min(MAX_POINTS, POINTS_ON_SCREEN // max(1, runs)))


# Keys the runs logged beyond the standard charts ("other keys", e.g. a TRL run's train/loss): with no
# ?extra= in the address, each is charted when there are at most this many, else none until ticked.
OTHER_KEYS_CHARTED = 12
# Other keys charted at once: the page fetches every chart's keys in one /api/compare request.
MAX_EXTRA = MAX_KEYS - len(CHART_KEYS)


def extra_keys(asked: list[str], others: list[str]) -> tuple[list[str], list[str]]:
    """The other keys to chart, in the picker's order, from the address's `extra=` values (one key each,
    repeated; a lone empty `extra=` charts none), and notices about keys that cannot be charted."""
    if not asked:
        return (others if len(others) <= OTHER_KEYS_CHARTED else []), []
    wanted = set(asked)
    chosen = [key for key in others if key in wanted]
    missing = [key for key in dict.fromkeys(asked) if key and key not in set(others)]
    notices = []
    if missing:
        shown = ", ".join(repr(key[:60]) for key in missing[:5])
        more = f" and {len(missing) - 5} more" if len(missing) > 5 else ""
        notices.append(
            f"extra: {shown}{more}: not logged by these runs, or already in the standard charts; left out."
        )
    if len(chosen) > MAX_EXTRA:
        notices.append(
            f"extra: at most {MAX_EXTRA} other keys are charted at once; the first {MAX_EXTRA} are."
        )
        chosen = chosen[:MAX_EXTRA]
    return chosen, notices


def view_notices(query, run_ids: list[int], group_fields: list[str], sort_columns: list[str]) -> list[str]:
    """What the page's script cannot follow in the address's view (?draw=, ?group=, ?sort=, as
    static/js/compare.js reads them; the chart view's own, webapp.core.chart_view), and what it shows instead."""
    notices = []
    if "draw" in query:
        asked = [part for part in query["draw"].split(",") if part]
        unknown = [part for part in asked if parse_id(part) not in run_ids]
        if unknown:
            listed = ", ".join(quoted(part) for part in unknown[:5]) + (" ..." if len(unknown) > 5 else "")
            left = "every run is drawn" if len(unknown) == len(asked) else "left out"
            notices.append(f"draw: {listed}: not among the runs compared here; {left}.")
    hidden = [part for part in query.get("hide", "").split(",") if part]
    not_here = [part for part in hidden if not _entry_here(part, run_ids)]
    if not_here:
        listed = ", ".join(quoted(part) for part in not_here[:5]) + (" ..." if len(not_here) > 5 else "")
        notices.append(f"hide: {listed}: no line of these runs (run-<id> or group-<n>); not hidden.")
    group = query.get("group")
    if group and group not in group_fields:
        if group_fields:
            fields = ", ".join(group_fields)
            notices.append(
                f"group: {quoted(group)} is not a field these runs differ in (one of {fields}); not grouped by it."
            )
        else:
            notices.append(f"group: {quoted(group)}: these runs differ in no field to group by; not grouped.")
    sort = query.get("sort", "")
    if sort and sort.removeprefix("-") not in sort_columns:
        notices.append(
            f"sort: {quoted(sort)} is not a column of the runs table (one of {', '.join(sort_columns)}, "
            "'-' first for descending); not sorted."
        )
    # Switches, 1 on and 0 off (compare.js reads align=1 and bands=0): another value is the default, said so.
    for name, default in (("align", "not aligned at onset"), ("bands", "bands shown")):
        value = query.get(name)
        if value not in (None, "", "0", "1"):
            notices.append(f"{name}: expected 1 (on) or 0 (off), got {quoted(value)}; {default}.")
    if (
        query.get("x") == "time" and query.get("align") == "1"
    ):  # as compare.js: aligned, x is steps from onset
        notices.append(
            "x: 'time' with align=1: aligned at onset, the x axis counts steps from each collapse."
        )
    return notices + chart_view.view_notices(query)


def _entry_here(entry: str, run_ids: list[int]) -> bool:
    """A legend entry as static/js/compare.js names it: run-<id> of a compared run, or group-<n>."""
    kind, _, number = entry.partition("-")
    return kind == "group" and parse_id(number) is not None or kind == "run" and parse_id(number) in run_ids


def keys_at(text: str, others: list[str]) -> tuple[list[str], list[str]]:
    """`extra_at=0-5,9`: the keys at those places in the picker's list (what the page writes instead of
    `extra=` when those would make too long an address), and a notice about places it does not hold."""
    places: list[int] = []
    for part in filter(None, text.split(",")):
        found = re.fullmatch(r"([0-9]{1,6})(?:-([0-9]{1,6}))?", part)
        if found is None:
            return [""], [
                f"extra_at: {text[:60]!r} is not a list of places like 0-5,9; no other key charted."
            ]
        low, high = int(found[1]), int(found[2] or found[1])
        places.extend(range(low, high + 1)[: len(others) + 1])
    chosen = [others[place] for place in dict.fromkeys(places) if place < len(others)]
    beyond = any(place >= len(others) for place in places)
    notice = (
        [f"extra_at: places beyond the {len(others)} other keys of these runs are left out."]
        if beyond
        else []
    )
    return chosen or [""], notice


def compare_url(run_ids) -> str:
    return f"{reverse('compare')}?{selection.canonical_query(run_ids)}"


def names_in_charts(runs) -> dict[int, str]:
    """Each run's name as the legend, the hovers and the chart tables say it: with its experiment's where a
    run of another experiment has the same name (three grids' "seed=2" read "#223 seed=2", "#193 seed=2",
    told apart by their ids alone)."""
    experiments = defaultdict(set)
    for run in runs:
        experiments[run.display_name].add(run.experiment_id)
    return {
        run.pk: f"{run.display_name} ({run.experiment.name})"
        if len(experiments[run.display_name]) > 1
        else run.display_name
        for run in runs
    }


@login_required
@require_safe
def compare(request):
    values = request.GET.getlist("runs")
    if len(values) > 1:  # a checkbox form sends runs=3&runs=7: one shareable spelling
        ids, invalid = selection.split_ids(values)
        if not invalid:
            return redirect(compare_url(ids))
    chosen = selection.select(request.user, values)
    runs = chosen.runs
    colors = {run.pk: COLORS[i] for i, run in enumerate(runs)}
    diff = aggregates.config_diff(runs)
    without_config = [run for run in runs if not aggregates.has_config(run)]
    summaries = aggregates.summaries(runs)
    lead_rules, onsets = aggregates.onset_leads(runs)
    ablation_keys = [key for key in dict.fromkeys(run.experiment.ablation for run in runs) if key]
    group_fields = aggregates.group_fields(runs, diff)
    others = other_keys({key for run in runs for key in run.latest_metrics or {}}, CHARTS)
    asked, at_notices = keys_at(request.GET["extra_at"], others) if "extra_at" in request.GET else (None, [])
    extra, extra_notices = extra_keys(request.GET.getlist("extra") if asked is None else asked, others)
    extra_notices = at_notices + extra_notices
    chart_names = names_in_charts(runs)
    return render(
        request,
        "compare/compare.html",
        {
            "runs": runs,
            "notices": chosen.notices()
            + extra_notices
            + view_notices(
                request.GET, [run.pk for run in runs], group_fields, aggregates.sort_columns(lead_rules)
            ),
            "rows": [
                {
                    "run": run,
                    "color": colors[run.pk],
                    **summaries[run.pk],
                    "leads": [
                        (lead, aggregates.lead_text(lead))
                        for lead in (onsets[run.pk]["leads"][rule] for rule in lead_rules)
                    ],
                }
                for run in runs
            ],
            "lead_rules": lead_rules,
            "diff": diff,
            "differing": sum(row.differs for row in diff),
            "without_config": without_config,
            "with_config": len(runs) - len(without_config),
            "ablations": [
                {
                    "ablation": ablations.ABLATIONS[key],
                    **ablations.paper_table(
                        ablations.ABLATIONS[key], runs, summaries, aggregates.group_value
                    ),
                }
                for key in ablation_keys
                if key in ablations.ABLATIONS
            ],
            "max_runs": selection.MAX_RUNS,
            "runs_query": selection.canonical_query([run.pk for run in runs]),
            "page": {  # read by static/js/compare.js through json_script
                "runs": [
                    {
                        "id": run.pk,
                        "label": run.label,
                        "name": chart_names[run.pk],
                        "experiment": run.experiment.name,
                        "color": colors[run.pk],
                        "url": run.get_absolute_url(),
                        "onset": onsets[run.pk]["onset"],  # "align at onset" draws x = step - onset
                    }
                    for run in runs
                ],
                "charts": CHARTS,
                "lead_rules": lead_rules,  # the runs table's Lead columns, kept current while live
                "other_keys": others,  # the picker's keys; chart ids "extra-<index in this list>"
                "extra": extra,
                "max_extra": MAX_EXTRA,
                "max_keys": MAX_KEYS,
                "group_fields": group_fields,
                "group_by": next(
                    (
                        ablations.ABLATIONS[key].group_by
                        for key in ablation_keys
                        if ablations.ABLATIONS[key].group_by in group_fields
                    ),
                    "",
                ),
                "colors": COLORS,
                "max_points": page_points(len(runs)),
                "urls": {"data": reverse("api_compare")},
            },
        },
    )


@login_required
@require_safe
def compare_csv(request):
    """GET /compare/summary.csv?runs=3,7,12: the compare page's runs table as CSV (aggregates.summary_table)."""
    try:
        runs = selection.every_run(request.user, request.GET.getlist("runs"))
    except selection.Refused as refusal:
        return HttpResponse(str(refusal), status=refusal.status, content_type="text/plain")
    header, rows = aggregates.summary_table(runs)
    line = export.csv_writer()
    text = line(header) + "".join(line([_csv_cell(value) for value in row]) for row in rows)
    response = HttpResponse(text, content_type=export.FORMATS["csv"])
    names = "-".join(str(run.pk) for run in runs[:10])
    response["Content-Disposition"] = f'attachment; filename="compare-{names}.csv"'
    return response


def _csv_cell(value):
    """Numbers as Python writes them (every digit), text safe to open in a spreadsheet, None empty."""
    if value is None:
        return ""
    return as_text_cell(value) if isinstance(value, str) else value


@login_required
@require_POST
def ablation_estimate(request):
    """The ablation form as it stands: how many runs and how long each should take here (estimate.answer,
    as for the new-experiment form)."""
    form = AblationForm(request.POST)
    form.is_valid()
    planned = form.planned if form.spec and not form.errors else []
    detector_overrides = form.spec.detector_overrides if form.spec else {}
    return JsonResponse(estimate.answer(form, planned, detector_overrides, request.user))


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def ablation_new(request):
    form = AblationForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        experiment = ablations.create(request.user, form.cleaned_data["ablation"], form.spec, form.planned)
        return redirect(compare_url(experiment.runs.order_by("id").values_list("id", flat=True)))
    return render(
        request,
        "compare/ablation_new.html",
        {"form": form, "ablations": ablations.ABLATIONS.values()},
        status=400 if form.errors else 200,
    )
