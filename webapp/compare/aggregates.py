"""What the compare page computes on the server: the config diff, the per-run summary, and the
mean with a min..max band over the runs of a group (seeds), aligned by step.

Group aggregate, per metric key and step: over the runs of the group that logged a finite value at
that step, mean, min, max and n (how many runs). It is computed from the runs' series the page loads
anyway (webapp.metrics.downsample.load_series), so grouping costs no query. When no run's series
was downsampled, steps are matched exactly; a run that has not reached a step does not count there.
When one was, every run's buckets are mapped onto one grid of max_points buckets over the group's
step range: the line is the mean of each run's last point in the bucket, the band spans the smallest
min and the largest max, so one seed's spike survives. Non-finite values (NaN, inf) are left out, as
the charts draw them as gaps.
"""

import math
import warnings
from dataclasses import dataclass

import numpy as np
from django.db import connection
from django.db.models import Max, Min, OuterRef, Q, Subquery

from diagnostics.metrics import TRAIN_SUCCESS, VAL_SUCCESS
from trainer.overrides import flatten
from webapp.alerts.models import DetectorEvent
from webapp.experiments import run_planning
from webapp.metrics.downsample import bucket_index, finite_or_none, finite_or_none_list
from webapp.metrics.models import MetricPoint, MetricRollup
from webapp.tracking.models import ExternalRun

SUCCESS = TRAIN_SUCCESS
# Group-by fields that are not in Run.config (an MLflow run's params may still name a preset).
PRESET_FIELD, EXPERIMENT_FIELD = "preset", "experiment"


def finite_points(**filters):
    """Points with a finite value. Bounds, not `NOT IN (NaN, inf, -inf)`: SQLite binds NaN as NULL, which
    makes that test unknown for every row; Postgres orders NaN above infinity, so `< inf` leaves it out."""
    return MetricPoint.objects.filter(value__isnull=False, value__gt=-math.inf, value__lt=math.inf, **filters)


# ---- config diff ----------------------------------------------------------------------------------


_MISSING = object()


@dataclass
class DiffRow:
    key: str
    values: list[str | None]  # one per run, as the grid writes values (None when the run lacks the field)
    differs: bool


def config_diff(runs) -> list[DiffRow]:
    """A row per config field of the runs trained here. An imported run has no config (only metrics):
    its cells are empty and take no part in whether a field differs, else every field would."""
    flat = [flatten(run.config) if has_config(run) else None for run in runs]
    keys = sorted({key for config in flat if config is not None for key in config})
    formatted: dict[str, str] = {}  # runs of a grid share most values; formatting one is a YAML dump

    def show(value) -> str:
        text = repr(value)
        if text not in formatted:
            # an empty string shows as "" (a blank cell would read as a field the run lacks: "–")
            formatted[text] = '""' if value == "" else run_planning.format_value(value)
        return formatted[text]

    rows = []
    for key in keys:
        raw = [config.get(key, _MISSING) for config in flat if config is not None]
        shown = [None if config is None or key not in config else show(config[key]) for config in flat]
        rows.append(DiffRow(key, shown, len({repr(value) for value in raw}) > 1))
    return rows


def has_config(run) -> bool:
    """Whether the run has a config to compare: one trained here, or an MLflow run (its params, as its
    client logged them); an imported file has none."""
    return bool(run.config) and (not run.experiment.imported or run.host == ExternalRun.HOST)


# ---- grouping ----------------------------------------------------------------------------------


def group_value(run, field: str) -> str:
    """The value a run has for a group-by field, as text ("" when it has none)."""
    if field == EXPERIMENT_FIELD:
        return f"#{run.experiment_id} {run.experiment.name}"
    if field == PRESET_FIELD and run.preset:
        return run.preset
    # An MLflow run has no preset of its own, but its script may log one as a param (its config).
    value = flatten(run.config or {}).get(field, _MISSING)
    return "" if value is _MISSING else run_planning.format_value(value)


def is_field(runs, field: str) -> bool:
    return field in (PRESET_FIELD, EXPERIMENT_FIELD) or any(
        field in flatten(run.config or {}) for run in runs
    )


def group_fields(runs, diff: list[DiffRow]) -> list[str]:
    """The fields worth grouping by: those that differ between the runs (seed excluded: grouping by
    seed puts every run alone), plus preset and experiment when those differ."""
    fields = [row.key for row in diff if row.differs and row.key != "seed"]
    for extra in (PRESET_FIELD, EXPERIMENT_FIELD):
        if len({group_value(run, extra) for run in runs}) > 1:
            fields.insert(0, extra)
    return fields


def groups(runs, field: str) -> list[dict]:
    """[{"value": "0.5", "runs": [run ids]}] in order of first appearance."""
    out: dict[str, list[int]] = {}
    for run in runs:
        out.setdefault(group_value(run, field), []).append(run.pk)
    return [{"value": value, "runs": ids} for value, ids in out.items()]


# The runs table's success columns a group's summary averages over its runs (seeds).
GROUP_MEASURES = ("final_success", "best_success", "val_success")


def group_summary(run_ids: list[int], summaries: dict[int, dict]) -> dict:
    """A group's runs in the runs table's columns, as a paper reports seeds: per success column the mean,
    the sample standard deviation (n - 1; None for one run) and n, the runs that have a value; and how
    many of its runs collapsed, with each one's first collapse step."""
    out: dict = {}
    for measure in GROUP_MEASURES:
        values = [v for pk in run_ids if finite_or_none(v := summaries[pk].get(measure)) is not None]
        out[measure] = {
            "mean": float(np.mean(values)) if values else None,
            "std": float(np.std(values, ddof=1)) if len(values) > 1 else None,
            "n": len(values),
        }
    steps = [
        summaries[pk]["first_collapse"] for pk in run_ids if summaries[pk].get("first_collapse") is not None
    ]
    out["collapsed"] = {"runs": len(steps), "of": len(run_ids), "steps": sorted(steps)}
    return out


def group_series(series: list[dict], keys: list[str], max_points: int) -> dict[str, dict]:
    """Per key: {"step", "mean", "min", "max", "n", "downsampled"} over the runs of a group, from the
    runs' series as load_series gives them (so the group costs no query of its own)."""
    return {key: _aggregate([s[key] for s in series if key in s and s[key].step], max_points) for key in keys}


def _finite(values) -> np.ndarray:
    array = np.array([np.nan if v is None else v for v in values], dtype=np.float64)
    array[~np.isfinite(array)] = np.nan
    return array


def _aggregate(runs: list, max_points: int) -> dict:
    if not runs:
        return {"step": [], "mean": [], "min": [], "max": [], "n": [], "downsampled": False}
    steps = [np.asarray(s.step, dtype=np.int64) for s in runs]
    values = [_finite(s.value) for s in runs]
    lows = [_finite(s.min) if s.downsampled else v for s, v in zip(runs, values)]
    highs = [_finite(s.max) if s.downsampled else v for s, v in zip(runs, values)]
    downsampled = any(s.downsampled for s in runs)
    if downsampled:
        # Each run is already reduced to buckets of its own step range: map them onto one grid of
        # max_points buckets over the group's range (webapp.metrics.downsample.bucket_index).
        first, last = min(int(s[0]) for s in steps), max(int(s[-1]) for s in steps)
        slots = [bucket_index(s, first, last, max_points) for s in steps]
    else:
        slots = steps  # exact: one slot per step
    every = np.unique(np.concatenate(slots))
    shape = (len(runs), len(every))
    line, low, high, last_step = (
        np.full(shape, np.nan),
        np.full(shape, np.nan),
        np.full(shape, np.nan),
        np.full(shape, -1),
    )
    for i, (slot, step, value, lo, hi) in enumerate(zip(slots, steps, values, lows, highs)):
        at = np.searchsorted(every, slot)
        line[i, at] = value  # the last point of the run in the slot wins
        last_step[i, at] = step
        np.fmin.at(low[i], at, lo)
        np.fmax.at(high[i], at, hi)
    present = np.isfinite(line)
    with np.errstate(invalid="ignore"):
        mean = np.nansum(line, axis=0) / present.sum(axis=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN slots stay NaN (a gap)
        band_low, band_high = np.nanmin(low, axis=0), np.nanmax(high, axis=0)
    keep = np.isfinite(band_low) | present.any(axis=0)
    return {
        "step": last_step.max(axis=0)[keep].tolist(),
        "mean": finite_or_none_list(mean[keep].tolist()),
        "min": finite_or_none_list(band_low[keep].tolist()),
        "max": finite_or_none_list(band_high[keep].tolist()),
        "n": present.sum(axis=0)[keep].tolist(),
        "downsampled": downsampled,
    }


# ---- summary --------------------------------------------------------------------------------------


def last_finite(key: str):
    """The run's finite value of `key` at its highest step (for .annotate on a Run queryset)."""
    return Subquery(finite_points(run_id=OuterRef("pk"), key=key).order_by("-step").values("value")[:1])


def best_finite(key: str):
    """The run's largest finite value of `key`: on Postgres the largest of its rollups' maxima (100 rows
    for 10,000 steps instead of every point; 100 runs' summary took 0.4-0.6 s from the points)."""
    if connection.vendor == "postgresql":
        rows = MetricRollup.objects.filter(run_id=OuterRef("pk"), key=key)
        best = rows.values("run_id").annotate(best=Max("high")).values("best")
    else:
        best = (
            finite_points(run_id=OuterRef("pk"), key=key)
            .values("run_id")
            .annotate(best=Max("value"))
            .values("best")
        )
    return Subquery(best)


def _first_event(level: str):
    return Min("events__step", filter=Q(events__level=level))


def summaries(runs) -> dict[int, dict]:
    """Per run id: final and best training success, last validation success, first warning and first
    collapse step (detector events), steps per hour, device."""
    from webapp.experiments.models import Run

    rows = (
        Run.objects.filter(pk__in=[run.pk for run in runs])
        .annotate(
            final_success=last_finite(SUCCESS),
            best_success=best_finite(SUCCESS),
            val_success=last_finite(VAL_SUCCESS),
            first_warning=_first_event(DetectorEvent.Level.WARNING),
            first_collapse=_first_event(DetectorEvent.Level.COLLAPSE),
        )
        .values("pk", "final_success", "best_success", "val_success", "first_warning", "first_collapse")
    )
    by_id = {row.pop("pk"): row for row in rows}
    clocked = logged_seconds([run for run in runs if run.experiment.imported])
    return {
        run.pk: {
            **by_id.get(run.pk, {}),
            "steps_per_hour": steps_per_hour(run, clocked.get(run.pk)),
            "device": run.device,
        }
        for run in runs
    }


SUMMARY_COLUMNS = (
    "final_success",
    "best_success",
    "val_success",
    "first_warning",
    "first_collapse",
    "steps_per_hour",
    "device",
)
# The runs table's columns before its summary ones, named as its CSV names them.
RUN_COLUMNS = ("run", "experiment", "status")


def lead_column(rule: str) -> str:
    """A rule's Lead column, named as the runs table's CSV and its `?sort=` name it."""
    return f"lead:{rule}"


def sort_columns(rules: list[str]) -> list[str]:
    """The names of the runs table's sortable columns (`?sort=<name>`, "-" first for descending): its CSV's
    column names, without run_id, which the page does not show."""
    return [*RUN_COLUMNS, *SUMMARY_COLUMNS, *map(lead_column, rules)]


def summary_table(runs) -> tuple[list[str], list[list]]:
    """The compare page's runs table as data, for its CSV: a row per run with its summary columns, each
    warning rule's lead ("lead:<rule>") and the config fields the runs differ in (as the config diff
    writes them), values unrounded; None where a run has none."""
    summary = summaries(runs)
    rules, onsets = onset_leads(runs)
    differing = [row for row in config_diff(runs) if row.differs]
    header = [
        "run_id",
        *RUN_COLUMNS,
        *SUMMARY_COLUMNS,
        *map(lead_column, rules),
        *(row.key for row in differing),
    ]
    rows = [
        [
            run.pk,
            run.display_name,
            run.experiment.name,
            run.status,
            *(summary[run.pk].get(column) for column in SUMMARY_COLUMNS),
            *(onsets[run.pk]["leads"][rule] for rule in rules),
            *(row.values[i] for row in differing),
        ]
        for i, run in enumerate(runs)
    ]
    return header, rows


def steps_per_hour(run, logged: float | None = None) -> float | None:
    """Steps done / hours of training. Over the seconds per step the run `logged` (logged_seconds) when it
    was trained elsewhere: its start and heartbeats are when its script sent its points, not when it
    trained (a backfill sent 200 steps of 6 s in 2 s: 1.9 million steps an hour). Else over every attempt,
    from each start to its end (to the last heartbeat while it runs)."""
    if run.step <= 0:
        return None
    if logged is not None:
        seconds = logged
    else:
        seconds = run.earlier_training.total_seconds()
        if run.started_at:
            end = run.finished_at or run.heartbeat_at
            if not end:
                return None
            seconds += (end - run.started_at).total_seconds()
    return run.step / (seconds / 3600) if seconds > 0 else None


# The seconds each run's steps took by its clock key, as its training-time axis sums them: each point's
# finite value times the steps since the point before it (webapp.metrics.downsample.clock_sums). On
# Postgres from the key's rollups: a bucket's mean value (its total over its points) times the steps since
# the bucket before it: the same where a run logs the key at every step, close where it logs every n-th
# (100 runs of 10,000 steps: 10,000 rollups instead of 1 million points, docs/BENCHMARKS.md). Numeric: seconds past a
# float's range are not an error.
_LOGGED_SECONDS_SQL = {
    "postgresql": f"""
SELECT run_id, LEAST(sum(seconds), 1e300)::float8
FROM (SELECT run_id, total::numeric * (last_step - LAG(last_step, 1, first_step - 1)
                                       OVER (PARTITION BY run_id ORDER BY bucket)) / count AS seconds
      FROM {MetricRollup._meta.db_table} WHERE key = %s AND run_id IN ({{runs}})) AS buckets
GROUP BY run_id
""",
    "other": f"""
SELECT run_id, sum(CASE WHEN value > %s AND value < %s THEN value * steps ELSE 0 END)
FROM (SELECT run_id, value, step - LAG(step, 1, step - 1) OVER (PARTITION BY run_id ORDER BY step) AS steps
      FROM {MetricPoint._meta.db_table} WHERE key = %s AND run_id IN ({{runs}})) AS points
GROUP BY run_id
""",
}


def logged_seconds(runs) -> dict[int, float]:
    """Per run id, the seconds of training its clock key (Run.clock_key) logged, for the runs that logged
    it: one query per clock key (a key of ours, veRL's or TRL's)."""
    runs_of: dict[str, list[int]] = {}
    for run in runs:
        if run.clock_key in (run.latest_metrics or {}):
            runs_of.setdefault(run.clock_key, []).append(run.pk)
    on_postgres = connection.vendor == "postgresql"
    query = _LOGGED_SECONDS_SQL["postgresql" if on_postgres else "other"]
    seconds = {}
    with connection.cursor() as cursor:
        for key, ids in runs_of.items():
            finite = [] if on_postgres else [-math.inf, math.inf]
            cursor.execute(query.format(runs=", ".join(["%s"] * len(ids))), [*finite, key, *ids])
            seconds.update(cursor.fetchall())
    return seconds


# ---- align at onset -------------------------------------------------------------------------------


def onset_leads(runs) -> tuple[list[str], dict[int, dict]]:
    """The rules that warned in any of the runs (sorted), and per run id: "onset", the step of its first
    collapse event (None without one), and "leads", per rule, the steps from that rule's first warning to
    the onset: negative when it came after the collapse (a late warning is worth seeing), None when the rule
    did not warn, or the run never collapsed."""
    ids = [run.pk for run in runs]
    onsets = dict(
        DetectorEvent.objects.filter(run_id__in=ids, level=DetectorEvent.Level.COLLAPSE)
        .values("run_id")
        .annotate(first=Min("step"))
        .values_list("run_id", "first")
    )
    first_warnings = list(
        DetectorEvent.objects.filter(run_id__in=ids, level=DetectorEvent.Level.WARNING)
        .values("run_id", "rule")
        .annotate(first=Min("step"))
        .values_list("run_id", "rule", "first")
    )
    rules = sorted({rule for _, rule, _ in first_warnings})
    leads: dict[int, dict[str, int | None]] = {pk: dict.fromkeys(rules) for pk in ids}
    for pk, rule, first in first_warnings:
        onset = onsets.get(pk)
        if onset is not None:
            leads[pk][rule] = onset - first
    return rules, {pk: {"onset": onsets.get(pk), "leads": leads[pk]} for pk in ids}


def lead_text(lead: int | None) -> str:
    """A lead as the summary table writes it: "3 steps", "2 steps late", "–" without one."""
    if lead is None:
        return "–"
    steps = f"{abs(lead)} step{'' if abs(lead) == 1 else 's'}"
    return steps + (" late" if lead < 0 else "")
