"""Metric series, sample trajectories. Sized for runs of 100k steps x 50 keys: one narrow row per
point, written in bulk and upserted on (run, key, step) so a retried or recomputed step overwrites,
plus a per-100-steps rollup so a chart of a long series reads 1,000 rows per key instead of 100,000."""

from collections import defaultdict

import psycopg
from django.db import IntegrityError, connection, models, transaction

ROLLUP_WIDTH = 100  # steps per MetricRollup bucket


class MetricPoint(models.Model):
    # No index of its own: the unique (run, key, step) index serves lookups by run. No foreign key
    # constraint in the database either: Postgres checks one per row, at commit, which was a fifth of the
    # time of a 1,000-point ingest; writers hold the run (ingest locks its row), and deleting a run deletes
    # its points through Django's on_delete.
    run = models.ForeignKey(
        "experiments.Run",
        on_delete=models.CASCADE,
        related_name="metric_points",
        db_index=False,
        db_constraint=False,
    )
    key = models.CharField(max_length=100)
    step = models.IntegerField()
    # NaN and +-inf are kept (Postgres floats hold them); charts draw them as gaps.
    value = models.FloatField(null=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key", "step"], name="metric_point_unique")]

    def __str__(self):
        return f"{self.key}@{self.step}={self.value}"

    @classmethod
    def steps(cls, run_id: int, *, keys=None, after=None, through=None) -> list[tuple[int, dict[str, float]]]:
        """The run's points as the detector takes them: [(step, {key: value})] in step order, a stored
        null as NaN; only `keys` when given, only steps in (after, through] when given."""
        rows = cls.objects.filter(run_id=run_id)
        if keys is not None:
            rows = rows.filter(key__in=keys)
        if after is not None:
            rows = rows.filter(step__gt=after)
        if through is not None:
            rows = rows.filter(step__lte=through)
        steps: dict[int, dict[str, float]] = defaultdict(dict)
        for step, key, value in (
            rows.values_list("step", "key", "value").order_by("step").iterator(chunk_size=20000)
        ):
            steps[step][key] = float("nan") if value is None else value
        return sorted(steps.items())

    @classmethod
    def upsert(cls, run_id: int, points: list[tuple[int, str, float]]) -> int:
        """Write (step, key, value) points; an existing (run, key, step) is overwritten. A point listed
        twice keeps its last value."""
        latest = {(step, key): None if value is None else float(value) for step, key, value in points}
        if not latest:
            return 0
        if connection.vendor != "postgresql":  # which keeps no rollups: charts read the points
            cls.objects.bulk_create(
                [
                    cls(run_id=run_id, step=step, key=key, value=value)
                    for (step, key), value in latest.items()
                ],
                batch_size=2000,
                update_conflicts=True,
                unique_fields=["run", "key", "step"],
                update_fields=["value"],
            )
            return len(latest)
        # Three arrays and one statement: building a model instance per point costs more than the
        # database's own work for a 1,000-point batch.
        steps, keys = map(list, zip(*latest))
        arrays = [run_id, steps, keys, list(latest.values())]
        with transaction.atomic(savepoint=False):
            try:
                # A trainer appends, so first a plain INSERT: a third cheaper than the upsert's speculative
                # insertion. In a savepoint, so that a batch that does overwrite points can still upsert.
                with transaction.atomic(), _binary_cursor() as cursor:
                    cursor.execute(_INSERT_POINTS, arrays)
            except IntegrityError:
                with _binary_cursor() as cursor:
                    cursor.execute(_UPSERT_POINTS, arrays)
            MetricRollup.refresh(run_id, {(key, step // ROLLUP_WIDTH) for step, key in latest})
        return len(latest)

    @classmethod
    def insert_new(cls, run_id: int, points) -> int:
        """Bulk-write (step, key, value) points of a run that has none yet (an import; no (step, key) twice):
        one COPY, then the run's rollups in one statement. Several times the speed of upsert's batches,
        which must find out, batch after batch, whether a point exists (docs/BENCHMARKS.md)."""
        if connection.vendor != "postgresql":
            return cls.upsert(run_id, list(points))
        count = 0
        with transaction.atomic(savepoint=False):
            connection.ensure_connection()
            with connection.connection.cursor() as cursor, cursor.copy(_COPY_POINTS) as copy:
                for step, key, value in points:
                    copy.write_row((run_id, step, key, value))
                    count += 1
            MetricRollup.refresh(run_id)
        return count

    @classmethod
    def latest_values(cls, run_id: int, keys: list[str]) -> dict[str, float | None]:
        """{key: value at the key's highest step} for the keys that have points."""
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # one index probe per key, one round trip
                cursor.execute(_LATEST_VALUES, [keys, run_id])
                return dict(cursor.fetchall())
        latest = {}
        for key in keys:
            found = cls.objects.filter(run_id=run_id, key=key).order_by("-step").values_list("value").first()
            if found:
                latest[key] = found[0]
        return latest


class MetricRollup(models.Model):
    """A summary of the points of one key in steps [bucket * ROLLUP_WIDTH, (bucket + 1) * ROLLUP_WIDTH):
    what a min/max chart needs (count, step range, last value, finite min and max). Kept in step with
    MetricPoint by MetricPoint.upsert, on Postgres; other databases chart from the points directly."""

    run = models.ForeignKey(
        "experiments.Run", on_delete=models.CASCADE, related_name="metric_rollups", db_index=False
    )
    key = models.CharField(max_length=100)
    bucket = models.IntegerField()
    count = models.IntegerField()
    first_step = models.IntegerField()
    last_step = models.IntegerField()
    last_value = models.FloatField(null=True)
    low = models.FloatField(null=True, help_text="smallest finite value; null when the bucket has none")
    high = models.FloatField(null=True, help_text="largest finite value; null when the bucket has none")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key", "bucket"], name="metric_rollup_unique")]

    @classmethod
    def refresh(cls, run_id: int, buckets: set[tuple[str, int]] | None = None) -> None:
        """Recompute the given (key, bucket) summaries from the points; all of the run's when None."""
        if connection.vendor != "postgresql" or buckets == set():
            return
        params = {"run": run_id, "width": ROLLUP_WIDTH}
        if buckets:
            keys, numbers = zip(*sorted(buckets))
            params.update(keys=list(keys), buckets=list(numbers))
        with connection.cursor() as cursor:
            cursor.execute(_REFRESH_BUCKETS if buckets else _REFRESH_RUN, params)


def _binary_cursor():
    """A cursor that sends parameters apart from the query, in binary where it says %b (Django's own cursors
    write them into the query text)."""
    connection.ensure_connection()
    return connection.make_cursor(psycopg.Cursor(connection.connection))


# Arrays go in binary: Postgres parses a 1,000-element text array literal slower than it inserts the rows.
_INSERT_POINTS = """
INSERT INTO metrics_metricpoint (run_id, step, key, value)
SELECT %b, * FROM unnest(%b::int[], %b::text[], %b::float8[])
"""
_COPY_POINTS = "COPY metrics_metricpoint (run_id, step, key, value) FROM STDIN"
_UPSERT_POINTS = _INSERT_POINTS + "ON CONFLICT (run_id, key, step) DO UPDATE SET value = EXCLUDED.value"
_LATEST_VALUES = """
SELECT k.key, p.value FROM unnest(%s::text[]) AS k(key)
CROSS JOIN LATERAL (SELECT value FROM metrics_metricpoint
                    WHERE run_id = %s AND key = k.key ORDER BY step DESC LIMIT 1) AS p
"""
_FINITE = "p.value NOT IN ('NaN', 'Infinity', '-Infinity')"
_SUMMARY = f"""
SELECT p.run_id, p.key, p.step / {ROLLUP_WIDTH}, count(*), min(p.step), max(p.step),
       -- the value at the highest step: steps are unique within a key, so the step decides the max
       (max(ARRAY[p.step::float8, p.value]))[2],
       min(p.value) FILTER (WHERE {_FINITE}), max(p.value) FILTER (WHERE {_FINITE})
"""
_UPSERT = """
INSERT INTO metrics_metricrollup (run_id, key, bucket, count, first_step, last_step, last_value, low, high)
{select}
GROUP BY p.run_id, p.key, p.step / %(width)s
ON CONFLICT (run_id, key, bucket) DO UPDATE SET
    count = EXCLUDED.count, first_step = EXCLUDED.first_step, last_step = EXCLUDED.last_step,
    last_value = EXCLUDED.last_value, low = EXCLUDED.low, high = EXCLUDED.high
"""
# Touched buckets only: one index range scan on (run, key, step) per bucket.
_REFRESH_BUCKETS = _UPSERT.format(
    select=_SUMMARY
    + f"""
FROM unnest(%(keys)s::text[], %(buckets)s::int[]) AS t(key, bucket)
JOIN metrics_metricpoint p ON p.run_id = %(run)s AND p.key = t.key
     AND p.step >= t.bucket * {ROLLUP_WIDTH} AND p.step < (t.bucket + 1)::bigint * {ROLLUP_WIDTH}"""
)
# (bigint: the bucket after the last step, 2**31 - 1, ends beyond the integer range)
_REFRESH_RUN = _UPSERT.format(select=_SUMMARY + "FROM metrics_metricpoint p WHERE p.run_id = %(run)s")


class Sample(models.Model):
    """One sampled trajectory at a step, as the trainer reports it (turns, think, answer, rewards)."""

    run = models.ForeignKey("experiments.Run", on_delete=models.CASCADE, related_name="samples")
    step = models.IntegerField()
    index = models.IntegerField()
    data = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "step", "index"], name="sample_unique")]
        ordering = ["step", "index"]
