"""What the experiment list and page show per row: run counts by status, progress, ETA, collapse
counts and a success sparkline. Each is one aggregate query over the whole page, not one per row."""

import math
from datetime import timedelta
from statistics import fmean

from django.db.models import Avg, Count, F, IntegerField, Max, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Cast, Coalesce, Greatest
from django.utils import timezone

from diagnostics.metrics import TRAIN_SUCCESS
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import ETA_SILENCE, Run
from webapp.metrics.models import MetricPoint

SPARK_BUCKETS = 24
SPARK_WIDTH, SPARK_HEIGHT = 96, 22


def annotated(experiments):
    """Counts, progress and collapsed runs of each experiment's runs, archived ones left out (as on its page
    and the runs table); `runs_archived` says how many those are."""
    # Runs, not collapse events: a run that collapsed, recovered and collapsed again has two, and the list
    # said "3 collapses" of an experiment two of whose runs had collapsed.
    collapsed = (
        DetectorEvent.objects.filter(
            run__experiment=OuterRef("pk"),
            run__archived_at__isnull=True,
            level=DetectorEvent.Level.COLLAPSE,
        )
        .values("run__experiment")
        .annotate(n=Count("run", distinct=True))
        .values("n")
    )
    active = Q(runs__archived_at__isnull=True)
    # as Run.eta: not from a run whose worker has gone quiet
    heard = Q(runs__heartbeat_at__isnull=True) | Q(
        runs__heartbeat_at__gte=timezone.now() - timedelta(seconds=ETA_SILENCE)
    )
    return experiments.annotate(
        run_count=Count("runs", filter=active),
        runs_archived=Count("runs", filter=Q(runs__archived_at__isnull=False)),
        **{
            f"runs_{status}": Count("runs", filter=active & Q(runs__status=status))
            for status in Run.Status.values
        },
        steps_done=Coalesce(Sum("runs__step", filter=active), 0),
        steps_total=Coalesce(Sum("runs__total_steps", filter=active), 0),
        # Runs trained elsewhere have no planned steps: the furthest step one of them logged tells how far
        # it got (their `step` is the newest step logged, not a count of steps: MLflow steps may start at 1).
        newest_step=Max("runs__step", filter=active),
        eta_seconds=Max("runs__eta_seconds", filter=active & Q(runs__status=Run.Status.RUNNING) & heard),
        runs_collapsed=Coalesce(Subquery(collapsed, output_field=IntegerField()), 0),
    )


def annotated_runs(runs):
    return runs.annotate(
        collapse_count=Count("events", filter=Q(events__level=DetectorEvent.Level.COLLAPSE))
    ).order_by("id")


def attach_sparklines(experiments):
    """Set `.sparkline` (SVG polyline points: the mean over runs of each run's success) and `.spread` (SVG
    polygon points: the lowest and highest run, where runs differ) on each experiment, over its runs that
    are not archived (those its row counts). A mean alone read two collapsed runs beside two solved ones
    as one run at half success."""
    _attach(experiments, "run__experiment_id", run__archived_at__isnull=True)


def attach_run_sparklines(runs):
    _attach(runs, "run_id")


def _attach(objects, group_field, **point_filter):
    objects = list(objects)
    series = success_buckets({obj.pk for obj in objects}, group_field, **point_filter)
    for obj in objects:
        buckets = series.get(obj.pk, [])
        obj.sparkline = polyline([(bucket, mean) for bucket, mean, _, _ in buckets])
        obj.spread = spread(buckets)


def success_buckets(ids, group_field, **point_filter) -> dict[int, list[tuple[int, float, float, float]]]:
    """{id: [(bucket, mean, lowest, highest)]}: steps cut into SPARK_BUCKETS buckets of each run's length;
    each run's mean success in a bucket, over the points `point_filter` keeps, then their mean, lowest and
    highest over the id's runs (one run: all three its own)."""
    if not ids:
        return {}
    length = Greatest(F("run__total_steps"), F("run__step"), 1)
    rows = (
        MetricPoint.objects.filter(
            **{f"{group_field}__in": ids}, key=TRAIN_SUCCESS, value__isnull=False, **point_filter
        )
        .annotate(bucket=Cast(F("step") * SPARK_BUCKETS / length, IntegerField()))
        .values(group_field, "run_id", "bucket")
        .annotate(mean=Avg("value"))
        .order_by()
    )
    runs_means: dict[int, dict[int, list[float]]] = {}
    for row in rows:
        if row["mean"] is not None and math.isfinite(row["mean"]):
            bucket = min(row["bucket"], SPARK_BUCKETS)
            runs_means.setdefault(row[group_field], {}).setdefault(bucket, []).append(row["mean"])
    return {
        pk: [(bucket, fmean(means), min(means), max(means)) for bucket, means in sorted(buckets.items())]
        for pk, buckets in runs_means.items()
    }


def _xy(bucket: int, value: float) -> str:
    """A bucket's point in the SPARK_WIDTH x SPARK_HEIGHT box; success is in [0, 1]."""
    x = SPARK_WIDTH * bucket / SPARK_BUCKETS
    y = SPARK_HEIGHT * (1 - min(max(value, 0.0), 1.0))
    return f"{x:.1f},{y:.1f}"


def polyline(points) -> str:
    """ "x,y x,y ..." of (bucket, value) points."""
    if len(points) < 2:
        return ""
    return " ".join(_xy(bucket, value) for bucket, value in points)


def spread(buckets) -> str:
    """The polygon between the highest and the lowest run of each bucket; "" where no bucket's runs differ."""
    if len(buckets) < 2 or all(low == high for _, _, low, high in buckets):
        return ""
    top = [_xy(bucket, high) for bucket, _, _, high in buckets]
    bottom = [_xy(bucket, low) for bucket, _, low, _ in reversed(buckets)]
    return " ".join(top + bottom)
