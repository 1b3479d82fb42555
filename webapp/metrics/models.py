"""Metric series, sample trajectories. Sized for runs of 100k steps x 50 keys: one narrow row per
point, written in bulk and upserted on (run, key, step) so a retried or recomputed step overwrites,
plus a per-100-steps rollup so a chart of a long series reads 1,000 rows per key instead of 100,000."""

from collections import defaultdict

import psycopg
from django.db import connection, models, transaction
from django.utils import timezone

from webapp.experiments.models import Run
from webapp.metrics import binary_arrays

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
    key = models.CharField(max_length=250)
    step = models.IntegerField()
    # NaN and +-inf are kept (Postgres floats hold them); charts draw them as gaps.
    value = models.FloatField(null=True)
    # When an MLflow client logged the point (its `timestamp`, milliseconds since 1970), which get_run and
    # get_metric_history give back; a point sent to EchoLab's own API (ingest.write) has the time it arrived;
    # null for points from EchoLab's trainer, imported files, and points stored before it was kept.
    logged_at = models.BigIntegerField(null=True)

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
    def upsert(
        cls,
        run_id: int,
        points: list[tuple[int, str, float | None]],
        logged_at: dict[tuple[int, str], int] | None = None,
    ) -> int:
        """Write (step, key, value) points; an existing (run, key, step) is overwritten. A point listed
        twice keeps its last value. logged_at as for write_batch."""
        if connection.vendor == "postgresql":
            return cls.write_batch(run_id, points, logged_at=logged_at)[1]
        # Other databases keep no rollups (charts read the points) and take no row locks.
        latest = {(step, key): None if value is None else float(value) for step, key, value in points}
        first = {}
        for step, key in latest:
            first[key] = min(step, first.get(key, step))
        newest = dict(
            cls.objects.filter(run_id=run_id, key__in=first)
            .values("key")
            .annotate(last=models.Max("step"))
            .values_list("key", "last")
        )
        if any(step <= newest.get(key, -1) for key, step in first.items()):  # as write_batch counts them
            Run.objects.filter(pk=run_id).update(rewrites=models.F("rewrites") + 1)
        logged_at = logged_at or {}
        cls.objects.bulk_create(
            [
                cls(run_id=run_id, step=step, key=key, value=value, logged_at=logged_at.get((step, key)))
                for (step, key), value in latest.items()
            ],
            batch_size=2000,
            update_conflicts=True,
            unique_fields=["run", "key", "step"],
            update_fields=["value", "logged_at"],
        )
        return len(latest)

    @classmethod
    def write_batch(
        cls,
        run_id: int,
        points: list[tuple[int, str, float | None]],
        *,
        owner_id: int | None = None,
        latest_metrics: bool = False,
        refuse_statuses: tuple[str, ...] = (),
        trained_elsewhere_only: bool = False,
        logged_at: dict[tuple[int, str], int] | None = None,
        arrived_at: int | None = None,
        unstepped: frozenset[str] = frozenset(),
        max_keys: int | None = None,
    ) -> tuple[dict, int]:
        """upsert on Postgres, rollups included, under the run's row lock: batches for one run take turns,
        so they neither lose each other's rollup counts nor deadlock on each other's points. With
        latest_metrics, run.latest_metrics follows (the value at each written key's highest step). A run
        whose status is in refuse_statuses gets nothing, nor, with trained_elsewhere_only, one of an
        experiment EchoLab trains (not imported); with owner_id, neither does a run of another user
        (Run.DoesNotExist, as for a run that does not exist: Run.objects.for_user's scope, checked under the
        lock). Returns the run's RUN_STATE columns as the lock found them, and "imported", its experiment's
        (with latest_metrics, also "key_count": the keys it has logged, this batch's included, and the step
        and rewrites as this batch left them), and the points written. logged_at: {(step, key): when an
        MLflow client logged it}; arrived_at, the logged_at of the other points (milliseconds since 1970).
        unstepped: keys whose points do not move the run's step (numbered in arrival order, not steps).
        max_keys: a batch that would give the run more keys than this (in latest_metrics) writes nothing,
        as a refused one.

        Two statements, sent in one round trip, in one transaction: the lock, then one statement that
        writes the points, the rollups and latest_metrics. On a loaded machine each round trip to the
        database costs a millisecond or more; this is one where there were nine."""
        latest = {(step, key): None if value is None else float(value) for step, key, value in points}
        steps, keys = (list(column) for column in zip(*latest)) if latest else ([], [])
        params = {
            "run": run_id,
            "owner": owner_id,
            "steps": binary_arrays.fixed(steps, binary_arrays.INT4),
            "keys": binary_arrays.text(keys),
            "values": binary_arrays.fixed(list(latest.values()), binary_arrays.FLOAT8),
            # null unless given: unnest pads it with nulls
            "logged_at": binary_arrays.fixed([logged_at.get(point) for point in latest], binary_arrays.INT8)
            if logged_at
            else None,
            "arrived_at": arrived_at,
            "unstepped": binary_arrays.text(sorted(unstepped)),
            "max_keys": max_keys,
            "batch_keys": binary_arrays.text(sorted(set(keys))),
            "refuse": list(refuse_statuses),
            "elsewhere_only": trained_elsewhere_only,
            "now": timezone.now(),
        }
        connection.ensure_connection()
        conn = connection.connection

        # One round trip: outside a transaction (autocommit) the statements sent before the pipeline's sync
        # form one implicit transaction, committed at the sync (an error rolls all of them back); inside a
        # caller's transaction they are part of it, and there a failed append would abort that transaction,
        # so it upserts straight away. The write's snapshot is taken once the lock is held, so it sees every
        # batch committed before.
        def send(upsert: bool):
            with conn.pipeline():
                lock, write = psycopg.Cursor(conn), psycopg.Cursor(conn)
                binary_arrays.register(write)
                lock.execute(_LOCK_RUN, {"run": run_id, "owner": owner_id})
                write.execute(_WRITES[(upsert, latest_metrics)], params)
            return lock.fetchone(), write.fetchone()

        if connection.in_atomic_block:
            locked, (written, *after) = send(upsert=True)
        else:
            try:
                locked, (written, *after) = send(upsert=False)
            except psycopg.errors.UniqueViolation:
                locked, (written, *after) = send(upsert=True)
        if locked is None:
            raise Run.DoesNotExist(f"run {run_id} does not exist")
        state = dict(zip((*RUN_STATE, "imported"), locked))
        written_state = dict(zip(("key_count", "step", "rewrites"), after))
        return {
            **state,
            **{name: value for name, value in written_state.items() if value is not None},
        }, written

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
    def newest(cls, run_id: int, keys: list[str]) -> dict[str, tuple[int, float | None, int | None]]:
        """{key: (its highest step, the value there, logged_at there)} for the keys that have points."""
        if connection.vendor == "postgresql":
            with connection.cursor() as cursor:  # one index probe per key, one round trip
                cursor.execute(_NEWEST, [keys, run_id])
                return {key: point for key, *point in cursor.fetchall()}
        latest = {}
        for key in keys:
            rows = cls.objects.filter(run_id=run_id, key=key).order_by("-step")
            found = rows.values_list("step", "value", "logged_at").first()
            if found:
                latest[key] = found
        return latest


class MetricRollup(models.Model):
    """A summary of the points of one key in steps [bucket * ROLLUP_WIDTH, (bucket + 1) * ROLLUP_WIDTH):
    what a min/max chart needs (count, step range, last value, finite min and max). Kept in step with
    MetricPoint by MetricPoint.upsert, on Postgres; other databases chart from the points directly."""

    run = models.ForeignKey(
        "experiments.Run", on_delete=models.CASCADE, related_name="metric_rollups", db_index=False
    )
    key = models.CharField(max_length=250)
    bucket = models.IntegerField()
    count = models.IntegerField()
    first_step = models.IntegerField()
    last_step = models.IntegerField()
    last_value = models.FloatField(null=True)
    low = models.FloatField(null=True, help_text="smallest finite value; null when the bucket has none")
    high = models.FloatField(null=True, help_text="largest finite value; null when the bucket has none")
    total = models.FloatField(
        null=True, help_text="sum of its finite values, each within ±1e300; null when the bucket has none"
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key", "bucket"], name="metric_rollup_unique")]

    @classmethod
    def last_logged_step(cls, run_id: int) -> int | None:
        """The highest step the run logged any key at: from its summaries on Postgres, from its points
        elsewhere (other databases keep no summaries)."""
        if connection.vendor != "postgresql":
            return MetricPoint.objects.filter(run_id=run_id).aggregate(last=models.Max("step"))["last"]
        return cls.objects.filter(run_id=run_id).aggregate(last=models.Max("last_step"))["last"]

    @classmethod
    def refresh(cls, run_id: int) -> None:
        """Recompute all of the run's summaries from its points (after a bulk write that bypassed them)."""
        if connection.vendor != "postgresql":
            return
        with connection.cursor() as cursor:
            cursor.execute(_REFRESH_RUN, {"run": run_id, "width": ROLLUP_WIDTH})


_COPY_POINTS = "COPY metrics_metricpoint (run_id, step, key, value) FROM STDIN"
_NEWEST = """
SELECT k.key, p.step, p.value, p.logged_at FROM unnest(%s::text[]) AS k(key)
CROSS JOIN LATERAL (SELECT step, value, logged_at FROM metrics_metricpoint
                    WHERE run_id = %s AND key = k.key ORDER BY step DESC LIMIT 1) AS p
"""
_FINITE = "{0}.value NOT IN ('NaN', 'Infinity', '-Infinity')"
# A summary of rows p(step, value) grouped by key and bucket. The value at the highest step: steps are
# unique within a key, so the step decides the max.
_SUMMARY = f"""count(*) AS count, min(p.step) AS first_step, max(p.step) AS last_step,
       (max(ARRAY[p.step::float8, p.value]))[2] AS last_value,
       min(p.value) FILTER (WHERE {_FINITE.format("p")}) AS low,
       max(p.value) FILTER (WHERE {_FINITE.format("p")}) AS high,
       sum(LEAST(GREATEST(p.value, -1e300), 1e300)) FILTER (WHERE {_FINITE.format("p")}) AS total"""
# (A total of the bucket's at most ROLLUP_WIDTH values, each within ±1e300, cannot overflow a float8.)
_ROLLUP_COLUMNS = "(run_id, key, bucket, count, first_step, last_step, last_value, low, high, total)"
_REFRESH_RUN = f"""
INSERT INTO metrics_metricrollup {_ROLLUP_COLUMNS}
SELECT p.run_id, p.key, p.step / %(width)s, {_SUMMARY}
FROM metrics_metricpoint p WHERE p.run_id = %(run)s
GROUP BY p.run_id, p.key, p.step / %(width)s
ON CONFLICT (run_id, key, bucket) DO UPDATE SET
    count = EXCLUDED.count, first_step = EXCLUDED.first_step, last_step = EXCLUDED.last_step,
    last_value = EXCLUDED.last_value, low = EXCLUDED.low, high = EXCLUDED.high, total = EXCLUDED.total
"""

# What a run's row tells an ingest request's answer (webapp.metrics.api.run_state).
RUN_STATE = (
    "status",
    "step",
    "total_steps",
    "eta_seconds",
    "error",
    "host",
    "device",
    "attempt",
    "rewrites",
    "stop_requested",
)
# The run, if it is the owner's (or owner is null: the trainer's own writes and imports).
_RUN_OF_OWNER = """r.id = %(run)b AND (%(owner)b::bigint IS NULL OR r.experiment_id IN (
    SELECT id FROM experiments_experiment WHERE owner_id = %(owner)b))"""
_IMPORTED = "SELECT imported FROM experiments_experiment e WHERE e.id = r.experiment_id"
_LOCK_RUN = f"""SELECT {", ".join(RUN_STATE)}, ({_IMPORTED}) FROM experiments_run r WHERE {_RUN_OF_OWNER}
FOR NO KEY UPDATE"""
# One statement: the points, then their rollups, from what the points' INSERT returns. Its sub-statements
# share one snapshot, taken before any of them writes: a point read from the table is one stored before
# this batch. The arrays go in binary: Postgres parses a 1,000-element text array literal slower than it
# inserts the rows.
_WRITE = f"""
WITH batch AS (
    SELECT * FROM unnest(%(steps)b::int[], %(keys)b::text[], %(values)b::float8[], %(logged_at)b::int8[])
        AS b(step, key, value, logged_at)
    WHERE EXISTS (
        SELECT FROM experiments_run r WHERE {_RUN_OF_OWNER} AND r.status <> ALL(%(refuse)b::text[])
        AND (NOT %(elsewhere_only)b OR ({_IMPORTED}))
        -- at most max_keys keys a run (null: no limit), counted only when the batch brings a new one
        AND (%(max_keys)b::int IS NULL OR r.latest_metrics ?& %(batch_keys)b::text[]
             OR (SELECT count(*) FROM (SELECT jsonb_object_keys(r.latest_metrics)
                                       UNION SELECT unnest(%(batch_keys)b::text[])) AS k) <= %(max_keys)b)
    )
),
written AS (
    INSERT INTO metrics_metricpoint AS p (run_id, step, key, value, logged_at)
    SELECT %(run)b, step, key, value, coalesce(logged_at, %(arrived_at)b::bigint) FROM batch
    {{on_conflict}}
),
touched AS (
    SELECT p.key, p.step / {ROLLUP_WIDTH} AS bucket, bool_or(p.overwrote) AS overwrote, {_SUMMARY}
    FROM written p GROUP BY p.key, p.step / {ROLLUP_WIDTH}
),
-- A bucket that only gained points: its summary merges with the batch's, without reading its points.
merged AS (
    INSERT INTO metrics_metricrollup AS r {_ROLLUP_COLUMNS}
    SELECT %(run)b, key, bucket, count, first_step, last_step, last_value, low, high, total
    FROM touched WHERE NOT overwrote
    ON CONFLICT (run_id, key, bucket) DO UPDATE SET
        count = r.count + EXCLUDED.count,
        first_step = LEAST(r.first_step, EXCLUDED.first_step),
        last_step = GREATEST(r.last_step, EXCLUDED.last_step),
        last_value = CASE WHEN EXCLUDED.last_step > r.last_step THEN EXCLUDED.last_value ELSE r.last_value END,
        low = LEAST(r.low, EXCLUDED.low),  -- LEAST and GREATEST skip nulls (a bucket with no finite value)
        high = GREATEST(r.high, EXCLUDED.high),
        total = coalesce(r.total + EXCLUDED.total, r.total, EXCLUDED.total)
    RETURNING 1
),
-- A bucket where a point was overwritten: summarised again from its stored points, less those the batch
-- replaced, plus the batch's.
rebuilt AS (
    INSERT INTO metrics_metricrollup AS r {_ROLLUP_COLUMNS}
    SELECT %(run)b, t.key, t.bucket, {_SUMMARY}
    FROM touched t CROSS JOIN LATERAL (
        SELECT s.step, s.value FROM metrics_metricpoint s
        WHERE s.run_id = %(run)b AND s.key = t.key AND s.step >= t.bucket * {ROLLUP_WIDTH}
              -- (bigint: the bucket after the last step, 2**31 - 1, ends beyond the integer range)
              AND s.step < (t.bucket + 1)::bigint * {ROLLUP_WIDTH}
              AND NOT EXISTS (SELECT FROM written w WHERE w.key = s.key AND w.step = s.step)
        UNION ALL
        SELECT w.step, w.value FROM written w WHERE w.key = t.key AND w.step / {ROLLUP_WIDTH} = t.bucket
    ) AS p
    WHERE t.overwrote
    GROUP BY t.key, t.bucket
    ON CONFLICT (run_id, key, bucket) DO UPDATE SET
        count = EXCLUDED.count, first_step = EXCLUDED.first_step, last_step = EXCLUDED.last_step,
        last_value = EXCLUDED.last_value, low = EXCLUDED.low, high = EXCLUDED.high, total = EXCLUDED.total
    RETURNING 1
)
"""
_WRITE_POINTS = "SELECT count(*) FROM written"
# A trainer appends: a plain INSERT first, a fifth cheaper than the upsert's speculative insertion; it fails
# on a point that exists, and then the batch is sent again as an upsert.
_APPEND = "RETURNING p.key, p.step, p.value, false AS overwrote"
# xmax is 0 on a row this INSERT created, and set on one it updated (overwrote).
_UPSERT = """ON CONFLICT (run_id, key, step) DO UPDATE SET value = EXCLUDED.value, logged_at = EXCLUDED.logged_at
    RETURNING p.key, p.step, p.value, p.xmax::text <> '0' AS overwrote"""
# latest_metrics: for each key written, the value at its highest step, the batch's or a stored one.
# (jsonb has no NaN or infinity.) Only ingest.write asks for them, for a run trained elsewhere: its
# heartbeat and step move on in the same UPDATE.
_WRITE_WITH_LATEST = f"""{_WRITE},
newest AS (
    SELECT b.key, CASE WHEN stored.step > b.step THEN stored.value ELSE b.value END AS value,
           stored.step >= b.first AS rewinds  -- the batch writes at or before the key's newest stored step
    -- (grouped, not DISTINCT ON: sorting 1,000 keys by the database's collation costs milliseconds)
    FROM (SELECT key, min(step) AS first, max(step) AS step, (max(ARRAY[step::float8, value]))[2] AS value
          FROM batch GROUP BY key) AS b
    LEFT JOIN LATERAL (
        SELECT s.step, s.value FROM metrics_metricpoint s
        WHERE s.run_id = %(run)b AND s.key = b.key ORDER BY s.step DESC LIMIT 1
    ) AS stored ON true
),
run AS (
    UPDATE experiments_run SET latest_metrics = latest_metrics || (
        SELECT jsonb_object_agg(
            n.key, CASE WHEN {_FINITE.format("n")} THEN to_jsonb(n.value) END
        ) FROM newest n
    ), rewrites = rewrites + CASE WHEN EXISTS (SELECT FROM newest WHERE rewinds) THEN 1 ELSE 0 END,
    -- a run trained elsewhere is heard from, and has reached the batch's last step
    -- (the web server's clock, as every heartbeat's: the sweeper compares them with its own)
    heartbeat_at = %(now)b,
    step = GREATEST(step, (SELECT max(step) FROM batch WHERE key <> ALL(%(unstepped)b)))  -- null: no move
    WHERE id = %(run)b AND EXISTS (SELECT FROM batch)
    RETURNING latest_metrics, step, rewrites
)
SELECT count(*),
       -- keys the run has logged, this batch's included (an empty batch updates nothing: the row as it is)
       coalesce((SELECT (SELECT count(*) FROM jsonb_object_keys(latest_metrics)) FROM run),
                (SELECT (SELECT count(*) FROM jsonb_object_keys(r.latest_metrics))
                 FROM experiments_run r WHERE r.id = %(run)b)),
       -- the step and rewrite count this batch left (null when it updated nothing: the lock's hold)
       (SELECT step FROM run), (SELECT rewrites FROM run)
FROM written"""
_WRITES = {
    (upsert, latest): (_WRITE_WITH_LATEST if latest else _WRITE + _WRITE_POINTS).replace(
        "{on_conflict}", _UPSERT if upsert else _APPEND
    )
    for upsert in (False, True)
    for latest in (False, True)
}


class StepRecord(models.Model):
    """A list of numbers a step logs under one registered key (train/reward_std_hist: every group's in-group
    reward std), kept whole like a Sample rather than as one point."""

    run = models.ForeignKey("experiments.Run", on_delete=models.CASCADE, related_name="step_records")
    step = models.IntegerField()
    key = models.CharField(max_length=200)
    values = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "key", "step"], name="step_record_unique")]
        ordering = ["key", "step"]


class Sample(models.Model):
    """One sampled trajectory at a step, as the trainer reports it (turns, think, answer, rewards)."""

    run = models.ForeignKey("experiments.Run", on_delete=models.CASCADE, related_name="samples")
    step = models.IntegerField()
    index = models.IntegerField()
    data = models.JSONField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "step", "index"], name="sample_unique")]
        ordering = ["step", "index"]
