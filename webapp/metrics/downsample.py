"""Metric series for charts, reduced to at most `max_points` per key without losing spikes.

A series longer than `max_points` is cut into `max_points` equal-width step buckets
(bucket = (step - first_step) * max_points // (last_step - first_step + 1)). Each bucket gives:
  - step, value: the bucket's LAST point (as W&B does), so the line ends where the run is now and a
    NaN at the end of a bucket still shows as a gap;
  - min, max: the smallest and largest FINITE value in the bucket (null when it has none), drawn as a
    band, so a one-step gradient spike survives any reduction. Uniform stride (MLflow), reservoir
    sampling (TensorBoard) or bucket means (ClearML) would drop or flatten it.

On Postgres a whole-series chart is reduced from MetricRollup (one summary row per 100 steps, kept by
MetricPoint.upsert), so 100k steps cost 1,000 rows per key; a rollup that straddles two chart buckets
counts in the later one, which moves a spike by less than 100 steps and never hides it. Incremental
queries (`after`) and charts finer than the rollups bucket in SQL; other databases (the sqlite dev
default) bucket the same way in numpy.
NaN, +inf and -inf come back as None: JSON cannot carry them, and charts draw None as a gap.
"""

import math
from dataclasses import dataclass

import numpy as np
from django.db import connection
from django.db.models import Count, Max, Min, Sum

from webapp.metrics.models import ROLLUP_WIDTH, MetricPoint, MetricRollup

_TABLE = MetricPoint._meta.db_table


def finite_or_none(value):
    return value if value is not None and math.isfinite(value) else None


@dataclass
class Series:
    step: list
    value: list
    min: list | None = None
    max: list | None = None

    @property
    def downsampled(self) -> bool:
        return self.min is not None

    def as_json(self) -> dict:
        body = {
            "step": self.step,
            "value": [finite_or_none(v) for v in self.value],
            "downsampled": self.downsampled,
        }
        if self.downsampled:
            body["min"] = [finite_or_none(v) for v in self.min]
            body["max"] = [finite_or_none(v) for v in self.max]
        return body


def bucket_index(steps: np.ndarray, first: int, last: int, max_points: int) -> np.ndarray:
    return (steps.astype(np.int64) - first) * max_points // (last - first + 1)


def bucket_numpy(steps, values, max_points: int) -> Series:
    """The reference reduction: `steps` ascending, `values` floats (NaN for null)."""
    steps = np.asarray(steps, dtype=np.int64)
    values = np.asarray(values, dtype=np.float64)
    if len(steps) <= max_points:
        return Series(steps.tolist(), values.tolist())
    buckets = bucket_index(steps, int(steps[0]), int(steps[-1]), max_points)
    starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
    ends = np.r_[starts[1:], len(steps)] - 1
    finite = np.isfinite(values)
    has_finite = np.add.reduceat(finite.astype(np.int64), starts) > 0
    low = np.minimum.reduceat(np.where(finite, values, np.inf), starts)
    high = np.maximum.reduceat(np.where(finite, values, -np.inf), starts)
    low[~has_finite] = np.nan
    high[~has_finite] = np.nan
    return Series(steps[ends].tolist(), values[ends].tolist(), low.tolist(), high.tolist())


def _none_to_nan(rows):
    return [math.nan if value is None else value for value in rows]


def key_stats(run_id: int, keys: list[str], after: int | None) -> dict[str, tuple[int, int, int]]:
    """{key: (count, first_step, last_step)} of the points that the query would return."""
    if after is None and connection.vendor == "postgresql":
        rows = (
            MetricRollup.objects.filter(run_id=run_id, key__in=keys)
            .values("key")
            .annotate(n=Sum("count"), first=Min("first_step"), last=Max("last_step"))
        )
        return {row["key"]: (row["n"], row["first"], row["last"]) for row in rows}
    points = MetricPoint.objects.filter(run_id=run_id, key__in=keys)
    if after is not None:
        points = points.filter(step__gt=after)
    rows = points.values("key").annotate(n=Count("id"), first=Min("step"), last=Max("step"))
    return {row["key"]: (row["n"], row["first"], row["last"]) for row in rows}


def _raw(run_id: int, keys: list[str], after: int | None) -> dict[str, Series]:
    points = MetricPoint.objects.filter(run_id=run_id, key__in=keys)
    if after is not None:
        points = points.filter(step__gt=after)
    series = {key: Series([], []) for key in keys}
    for key, step, value in points.order_by("key", "step").values_list("key", "step", "value"):
        series[key].step.append(step)
        series[key].value.append(value)
    return series


_BUCKET_SQL = f"""
SELECT p.key,
       max(p.step) AS last_step,
       -- the value at the bucket's highest step; steps are unique, so the array max is decided by step
       (max(ARRAY[p.step::float8, p.value]))[2] AS last_value,
       min(p.value) FILTER (WHERE p.value NOT IN ('NaN', 'Infinity', '-Infinity')) AS low,
       max(p.value) FILTER (WHERE p.value NOT IN ('NaN', 'Infinity', '-Infinity')) AS high
FROM {_TABLE} p
JOIN unnest(%s::text[], %s::bigint[], %s::bigint[]) AS r(key, first_step, span) ON p.key = r.key
WHERE p.run_id = %s AND p.step > %s
GROUP BY p.key, (p.step - r.first_step) * %s / r.span
ORDER BY p.key, last_step
"""


def _bucketed_sql(run_id: int, stats: dict, after: int | None, max_points: int) -> dict[str, Series]:
    keys = list(stats)
    firsts = [stats[key][1] for key in keys]
    spans = [stats[key][2] - stats[key][1] + 1 for key in keys]
    series = {key: Series([], [], [], []) for key in keys}
    with connection.cursor() as cursor:
        cursor.execute(
            _BUCKET_SQL, [keys, firsts, spans, run_id, -(2**31) if after is None else after, max_points]
        )
        for key, step, value, low, high in cursor.fetchall():
            s = series[key]
            s.step.append(step)
            s.value.append(value)
            s.min.append(low)
            s.max.append(high)
    return series


def _bucketed_rollups(run_id: int, stats: dict, max_points: int) -> dict[str, Series]:
    rows = (
        MetricRollup.objects.filter(run_id=run_id, key__in=list(stats))
        .order_by("key", "bucket")
        .values_list("key", "last_step", "last_value", "low", "high")
    )
    by_key = {key: [] for key in stats}
    for key, *summary in rows:
        by_key[key].append(summary)
    series = {}
    for key, summaries in by_key.items():
        last_step, last_value, low, high = (
            np.array(_none_to_nan(column), dtype=np.float64) for column in zip(*summaries)
        )
        _, first, last = stats[key]
        buckets = bucket_index(last_step, first, last, max_points)
        starts = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
        ends = np.r_[starts[1:], len(buckets)] - 1
        series[key] = Series(
            last_step[ends].astype(np.int64).tolist(),
            last_value[ends].tolist(),
            np.fmin.reduceat(low, starts).tolist(),
            np.fmax.reduceat(high, starts).tolist(),
        )
    return series


def _bucketed_numpy(run_id: int, stats: dict, after: int | None, max_points: int) -> dict[str, Series]:
    raw = _raw(run_id, list(stats), after)
    return {key: bucket_numpy(s.step, _none_to_nan(s.value), max_points) for key, s in raw.items()}


def load_series(
    run_id: int, keys: list[str], after: int | None = None, max_points: int = 1000
) -> dict[str, Series]:
    """Per key, the points with step > after, reduced to at most max_points buckets when longer."""
    stats = key_stats(run_id, keys, after)
    short = [key for key in keys if stats.get(key, (0,))[0] <= max_points]
    long = {key: stats[key] for key in keys if key not in short}
    series = _raw(run_id, short, after) if short else {}
    coarse = {
        key: stat
        for key, stat in long.items()
        if after is None
        and connection.vendor == "postgresql"
        and (stat[2] - stat[1] + 1) / max_points >= ROLLUP_WIDTH
    }
    if coarse:
        series.update(_bucketed_rollups(run_id, coarse, max_points))
    fine = {key: stat for key, stat in long.items() if key not in coarse}
    if fine:
        bucketed = _bucketed_sql if connection.vendor == "postgresql" else _bucketed_numpy
        series.update(bucketed(run_id, fine, after, max_points))
    return {key: series[key] for key in keys}
