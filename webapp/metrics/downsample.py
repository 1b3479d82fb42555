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
from contextlib import contextmanager
from dataclasses import dataclass

import numpy as np
import psycopg
from django.db import connection, transaction
from django.db.models import Count, Max, Min, Sum

from webapp.metrics.models import ROLLUP_WIDTH, MetricPoint, MetricRollup

_TABLE = MetricPoint._meta.db_table


def finite_or_none(value):
    return value if value is not None and math.isfinite(value) else None


def finite_or_none_list(values) -> list:
    """finite_or_none of each value; one numpy check first, since most series are all finite (a call per
    value took 0.17 s of a 100-run compare's 280,000 values)."""
    finite = np.isfinite(np.array(values, dtype=np.float64))  # None becomes NaN
    if finite.all():
        return list(values)
    return [value if ok else None for value, ok in zip(values, finite.tolist())]


@dataclass
class Series:
    step: list
    value: list
    min: list | None = None
    max: list | None = None
    sums: list | None = None  # a clock key's seconds per bucket (clock_sums), when downsampled

    @property
    def downsampled(self) -> bool:
        return self.min is not None

    def as_json(self) -> dict:
        body = {
            "step": self.step,
            "value": finite_or_none_list(self.value),
            "downsampled": self.downsampled,
        }
        if self.downsampled:
            body["min"] = finite_or_none_list(self.min)
            body["max"] = finite_or_none_list(self.max)
        if self.sums is not None:
            body["sums"] = self.sums
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


Pair = tuple[int, str]  # (run id, metric key)


@dataclass(frozen=True)
class Steps:
    """The steps a query reads: after `after` (a poll's last step held) through `through` (a zoom's end),
    each None for no bound."""

    after: int | None = None
    through: int | None = None

    @property
    def whole(self) -> bool:
        return self.after is None and self.through is None

    @property
    def bounds(self) -> list[int]:
        """The SQL parameters of `step > %s AND step <= %s`."""
        return [
            -(2**31) if self.after is None else self.after,
            2**31 - 1 if self.through is None else self.through,
        ]

    def of(self, points):
        """A MetricPoint queryset cut to these steps."""
        if self.after is not None:
            points = points.filter(step__gt=self.after)
        if self.through is not None:
            points = points.filter(step__lte=self.through)
        return points


def key_stats(run_ids: list[int], keys: list[str], steps: Steps) -> dict[Pair, tuple[int, int, int]]:
    """{(run, key): (count, first_step, last_step)} of the points that the query would return."""
    if steps.whole and connection.vendor == "postgresql":
        rows = (
            MetricRollup.objects.filter(run_id__in=run_ids, key__in=keys)
            .values("run_id", "key")
            .annotate(n=Sum("count"), first=Min("first_step"), last=Max("last_step"))
        )
    else:
        points = steps.of(MetricPoint.objects.filter(run_id__in=run_ids, key__in=keys))
        rows = points.values("run_id", "key").annotate(n=Count("id"), first=Min("step"), last=Max("step"))
    return {(row["run_id"], row["key"]): (row["n"], row["first"], row["last"]) for row in rows}


@contextmanager
def _without_jit(runs: int):
    """Postgres JIT compilation off until the block ends, for several runs. The planner guesses thousands
    of points per (run, key) pair, so a query over 20 pairs passes jit_above_cost and spends ~0.4 s
    compiling itself to read a few thousand rows; one run's queries stay below it."""
    if connection.vendor != "postgresql" or runs < 2:
        yield
        return
    with transaction.atomic():
        with connection.cursor() as cursor:
            cursor.execute("SET LOCAL jit = off")
        yield


def _unnest(pairs, *columns) -> list:
    """Query parameters for `unnest(%s::bigint[], %s::text[], ...)`: one array per column of `pairs`."""
    return [[run for run, _ in pairs], [key for _, key in pairs], *columns]


# One index range scan on (run, key, step) per pair: a LATERAL subquery behind OFFSET 0, which the planner
# cannot flatten into a join. A join lets it hash the pairs and scan every point of the table instead
# (3.8 s instead of a few ms for 20 runs' val/success on 13M points).
_RAW_SQL = f"""
SELECT r.run_id, r.key, p.step, p.value
FROM unnest(%s::bigint[], %s::text[]) AS r(run_id, key)
CROSS JOIN LATERAL (SELECT step, value FROM {_TABLE}
                    WHERE run_id = r.run_id AND key = r.key AND step > %s AND step <= %s OFFSET 0) AS p
ORDER BY r.run_id, r.key, p.step
"""


def _raw(pairs: list[Pair], steps: Steps) -> dict[Pair, Series]:
    series = {pair: Series([], []) for pair in pairs}
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(_RAW_SQL, [*_unnest(pairs), *steps.bounds])
            rows = cursor.fetchall()
    else:  # the sqlite dev default: both lists, then only the pairs asked for
        points = steps.of(
            MetricPoint.objects.filter(
                run_id__in={run for run, _ in pairs}, key__in={key for _, key in pairs}
            )
        )
        rows = points.order_by("run_id", "key", "step").values_list("run_id", "key", "step", "value")
    for run, key, step, value in rows:
        s = series.get((run, key))
        if s is not None:
            s.step.append(step)
            s.value.append(value)
    return series


def _ranges(stats: dict, pairs: list[Pair]) -> tuple[list[int], list[int]]:
    """Each pair's first step and number of steps spanned: the chart buckets' origin and width."""
    return [stats[pair][1] for pair in pairs], [stats[pair][2] - stats[pair][1] + 1 for pair in pairs]


_BUCKET_SQL = f"""
SELECT r.run_id, r.key,
       max(p.step) AS last_step,
       -- the value at the bucket's highest step; steps are unique, so the array max is decided by step
       (max(ARRAY[p.step::float8, p.value]))[2] AS last_value,
       min(p.value) FILTER (WHERE p.value NOT IN ('NaN', 'Infinity', '-Infinity')) AS low,
       max(p.value) FILTER (WHERE p.value NOT IN ('NaN', 'Infinity', '-Infinity')) AS high
FROM unnest(%s::bigint[], %s::text[], %s::bigint[], %s::bigint[]) AS r(run_id, key, first_step, span)
CROSS JOIN LATERAL (SELECT step, value FROM {_TABLE}
                    WHERE run_id = r.run_id AND key = r.key AND step > %s AND step <= %s OFFSET 0) AS p
GROUP BY r.run_id, r.key, (p.step - r.first_step) * %s / r.span
ORDER BY r.run_id, r.key, last_step
"""


def _bucketed_sql(stats: dict, steps: Steps, max_points: int) -> dict[Pair, Series]:
    pairs = list(stats)
    firsts, spans = _ranges(stats, pairs)
    series = {pair: Series([], [], [], []) for pair in pairs}
    with connection.cursor() as cursor:
        cursor.execute(_BUCKET_SQL, [*_unnest(pairs, firsts, spans), *steps.bounds, max_points])
        for run, key, step, value, low, high in cursor.fetchall():
            s = series[(run, key)]
            s.step.append(step)
            s.value.append(value)
            s.min.append(low)
            s.max.append(high)
    return series


# The rollups re-bucketed into chart buckets by Postgres, one row of arrays per pair: a chart bucket takes
# its rollups' last point and their least and greatest finite values. Fetched in binary, the arrays become
# lists in psycopg's C code; reading every rollup row into Python and re-bucketing there made load_many
# take 530-780 ms for a 100-run compare (140,000 rows), now 200-300 ms (docs/BENCHMARKS.md, Compare).
# Grouped per pair in a LATERAL subquery: grouped over all pairs at once, the rows were sorted on disk.
_ROLLUPS_SQL = f"""
SELECT r.pair, b.steps, b.values, b.lows, b.highs
FROM unnest(%s::bigint[], %s::text[], %s::bigint[], %s::bigint[], %s::int[])
     AS r(run_id, key, first_step, span, pair)
CROSS JOIN LATERAL (
    SELECT array_agg(last_step ORDER BY slot) AS steps, array_agg(last_value ORDER BY slot) AS values,
           array_agg(low ORDER BY slot) AS lows, array_agg(high ORDER BY slot) AS highs
    FROM (SELECT (u.last_step - r.first_step) * %s / r.span AS slot,
                 max(u.last_step) AS last_step,
                 -- the last point's value: steps are unique, so the array max is decided by step
                 (max(ARRAY[u.last_step::float8, u.last_value]))[2] AS last_value,
                 min(u.low) AS low, max(u.high) AS high
          FROM {MetricRollup._meta.db_table} u
          WHERE u.run_id = r.run_id AND u.key = r.key
          GROUP BY slot) AS chart_bucket
) AS b
"""


def _bucketed_rollups(stats: dict, max_points: int) -> dict[Pair, Series]:
    """All pairs' rollups, re-bucketed in one query."""
    pairs = list(stats)
    firsts, spans = _ranges(stats, pairs)
    series = {pair: Series([], [], [], []) for pair in pairs}
    connection.ensure_connection()
    # A psycopg cursor of its own (binary results; Django's cursors bind on the client and return text):
    # Django's query log and execute wrappers do not see this query.
    with psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(
            _ROLLUPS_SQL, [*_unnest(pairs, firsts, spans, list(range(len(pairs)))), max_points], binary=True
        )
        for pair, steps, values, lows, highs in cursor:
            if steps is not None:  # None: the pair has no rollups
                series[pairs[pair]] = Series(steps, values, lows, highs)
    return series


def _bucketed_numpy(stats: dict, steps: Steps, max_points: int) -> dict[Pair, Series]:
    raw = _raw(list(stats), steps)
    return {pair: bucket_numpy(s.step, _none_to_nan(s.value), max_points) for pair, s in raw.items()}


def load_many(
    run_ids: list[int],
    keys: list[str],
    after: int | None = None,
    max_points: int = 1000,
    through: int | None = None,
) -> dict[int, dict[str, Series]]:
    """Per run and key, the points with after < step <= through, reduced to at most max_points buckets
    when longer. A few queries whatever the number of runs: the step ranges, then the short series'
    points, the long series' rollups and (finer than the rollups, or a part of the steps) the long series'
    points bucketed in SQL."""
    with _without_jit(len(run_ids)):
        return _load_many(run_ids, keys, Steps(after, through), max_points)


def _load_many(run_ids, keys, steps: Steps, max_points) -> dict[int, dict[str, Series]]:
    stats = key_stats(run_ids, keys, steps)
    pairs = [(run, key) for run in run_ids for key in keys]
    short = [pair for pair in pairs if stats.get(pair, (0,))[0] <= max_points]
    long = {pair: stats[pair] for pair in pairs if stats.get(pair, (0,))[0] > max_points}
    series = _raw(short, steps) if short else {}
    coarse = {
        pair: stat
        for pair, stat in long.items()
        if steps.whole
        and connection.vendor == "postgresql"
        and (stat[2] - stat[1] + 1) / max_points >= ROLLUP_WIDTH
    }
    if coarse:
        series.update(_bucketed_rollups(coarse, max_points))
    fine = {pair: stat for pair, stat in long.items() if pair not in coarse}
    if fine:
        bucketed = _bucketed_sql if connection.vendor == "postgresql" else _bucketed_numpy
        series.update(bucketed(fine, steps, max_points))
    return {run: {key: series[(run, key)] for key in keys} for run in run_ids}


def clock_sums(run_id: int, key: str, series: Series, steps: Steps) -> list[float]:
    """Per bucket of a downsampled series of seconds per step (Run.clock_key), the seconds its steps took:
    each point's finite value times the steps since the point before it (a point logged every 10 steps
    stands for 10), summed over the bucket. A bucket's last value alone stood for all its steps: a run
    whose every tenth step took 60 s and the others 2 s read 3.9 times too short over 20,000 steps."""
    rows = list(
        steps.of(MetricPoint.objects.filter(run_id=run_id, key=key))
        .order_by("step")
        .values_list("step", "value")
    )
    return _bucket_seconds([step for step, _ in rows], [value for _, value in rows], series.step)


def _bucket_seconds(point_steps: list, values: list, bucket_steps: list) -> list[float]:
    """clock_sums over a key's points (steps ascending) and its series' buckets (each one's last step)."""
    if not point_steps:
        return [0.0] * len(bucket_steps)
    steps = np.asarray(point_steps, dtype=np.int64)
    seconds_per_step = np.array(_none_to_nan(values), dtype=np.float64)
    # a point belongs to the first bucket whose last step is at or after its own
    buckets = np.searchsorted(np.asarray(bucket_steps, dtype=np.int64), steps)
    with np.errstate(over="ignore", invalid="ignore"):  # seconds beyond a float's range: null in the answer
        finite = np.where(np.isfinite(seconds_per_step), seconds_per_step, 0.0)
        seconds = finite * np.diff(steps, prepend=steps[0] - 1)
        sums = np.bincount(buckets, weights=seconds, minlength=len(bucket_steps))[: len(bucket_steps)]
    return sums.tolist()


# Every point of one key for many runs, one row of arrays per run (binary: psycopg's C code makes the
# lists), for clock_sums of each: a query per run read 100 runs' clocks in 1.5 s (docs/BENCHMARKS.md).
_KEY_ARRAYS_SQL = f"""
SELECT r.run_id, p.steps, p.values
FROM unnest(%s::bigint[]) AS r(run_id)
CROSS JOIN LATERAL (SELECT array_agg(step ORDER BY step) AS steps, array_agg(value ORDER BY step) AS values
                    FROM {_TABLE} WHERE run_id = r.run_id AND key = %s) AS p
"""


def _key_points(run_ids: list[int], key: str) -> dict[int, tuple[list, list]]:
    """{run: (steps, values)} of every point of `key`, steps ascending."""
    if connection.vendor != "postgresql":
        rows = (
            MetricPoint.objects.filter(run_id__in=run_ids, key=key)
            .order_by("run_id", "step")
            .values_list("run_id", "step", "value")
        )
        points: dict[int, tuple[list, list]] = {}
        for run_id, step, value in rows:
            steps, values = points.setdefault(run_id, ([], []))
            steps.append(step)
            values.append(value)
        return points
    connection.ensure_connection()
    with psycopg.Cursor(connection.connection) as cursor:  # binary results, as in _bucketed_rollups
        cursor.execute(_KEY_ARRAYS_SQL, [run_ids, key], binary=True)
        return {run_id: (steps, values) for run_id, steps, values in cursor if steps is not None}


def load_clocks(clock_keys: dict[int, str], max_points: int) -> dict[int, Series]:
    """Per run ({run id: its seconds-per-step key}, Run.clock_key), that key's series over every step,
    with each bucket's seconds when downsampled (clock_sums): a training-time axis for many runs. Runs
    that logged none of it are left out."""
    runs_of: dict[str, list[int]] = {}
    for run_id, key in clock_keys.items():
        runs_of.setdefault(key, []).append(run_id)
    clocks = {}
    for key, run_ids in runs_of.items():
        loaded = load_many(run_ids, [key], max_points=max_points)
        for run_id, series in loaded.items():
            clock = series.get(key)
            if clock is not None and clock.step:
                clocks[run_id] = clock
        downsampled = [run_id for run_id in run_ids if run_id in clocks and clocks[run_id].downsampled]
        for run_id, (steps, values) in _key_points(downsampled, key).items():
            clocks[run_id].sums = _bucket_seconds(steps, values, clocks[run_id].step)
    return clocks


def load_series(
    run_id: int, keys: list[str], after: int | None = None, max_points: int = 1000, through: int | None = None
) -> dict[str, Series]:
    """load_many for one run."""
    return load_many([run_id], keys, after, max_points, through)[run_id]
