"""Metric points sent by an external trainer: validated as a whole, then upserted in one transaction.

A batch is `[{"step": 3, "key": "train/success", "value": 0.5}, ...]` or `{"points": [...]}`.
value is a number, null, or one of the strings "NaN", "Infinity", "-Infinity" (standard JSON has no
literal for them). One bad point rejects the batch: nothing is written.
"""

import math
import time
from typing import NamedTuple

from django.db import connection, transaction
from django.db.models import Max
from django.utils import timezone

from diagnostics.metrics import bounds, out_of_bounds, within
from diagnostics.series import NON_FINITE, key_problem
from webapp.core import jsonsafe
from webapp.experiments.models import Run
from webapp.metrics.models import RUN_STATE, MetricPoint

MAX_POINTS = 10_000
MAX_BODY_BYTES = 4 * 1024 * 1024
MAX_KEY_LENGTH = MetricPoint._meta.get_field("key").max_length
MAX_STEP = 2**31 - 1  # MetricPoint.step is a Postgres integer
# Distinct keys a run may log: one chart each on its page, and one entry each in every answer about it; a
# script that puts a counter or an id into its key names would otherwise grow them without bound.
MAX_KEYS_PER_RUN = 10_000
FIELDS = {"step", "key", "value"}
MAX_REPORTED_ERRORS = 20


class TooLarge(Exception):
    pass


class Refused(Exception):
    """The run takes no points from here: EchoLab trains it (its metrics come from its worker alone), or it
    has finished (its metrics are final, and its detector events were computed from them)."""


class Invalid(Exception):
    def __init__(self, errors: dict[str, str]):
        super().__init__(next(iter(errors.items())))
        self.errors = errors

    @property
    def message(self) -> str:
        field, problem = next(iter(self.errors.items()))
        more = len(self.errors) - 1
        return f"{field}: {problem}" + (f" (and {more} more)" if more else "")


def _is_value(value) -> bool:
    if value is None:
        return True
    if isinstance(value, str):
        return value in NON_FINITE
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        float(value)
    except OverflowError:  # an integer beyond the float range
        return False
    return True


def _step(value) -> int | None:
    """A step as an int, or None. 3.0 is the integer 3, as JSON Schema (and the OpenAPI document) has it."""
    if type(value) is float and value.is_integer():
        value = int(value)
    return value if type(value) is int and 0 <= value <= MAX_STEP else None


def _point_errors(where: str, point) -> dict[str, str]:
    if not isinstance(point, dict):
        return {where: "must be an object with step, key and value"}
    errors = {}
    for name in sorted(set(point) - FIELDS):
        errors[f"{where}.{name}"] = "unknown field; a point has step, key and value"
    step = point.get("step")
    if "step" not in point:
        errors[f"{where}.step"] = "is required"
    elif _step(step) is None:
        errors[f"{where}.step"] = f"must be a non-negative integer (at most {MAX_STEP})"
    key = point.get("key")
    if "key" not in point:
        errors[f"{where}.key"] = "is required"
    elif not isinstance(key, str):
        errors[f"{where}.key"] = f"must be a string, got {jsonsafe.json_type(key)}"
    elif problem := key_problem(key):
        errors[f"{where}.key"] = problem
    elif len(key) > MAX_KEY_LENGTH:
        errors[f"{where}.key"] = f"must be at most {MAX_KEY_LENGTH} characters, got {len(key)}"
    value = point.get("value")
    if "value" not in point:
        errors[f"{where}.value"] = "is required (null is allowed)"
    elif not _is_value(value):
        errors[f"{where}.value"] = 'must be a number, null, "NaN", "Infinity" or "-Infinity"' + (
            f", got {value!r}" if isinstance(value, jsonsafe.OversizedNumber) else ""
        )
    elif isinstance(key, str) and isinstance(value, (int, float)) and (problem := out_of_bounds(key, value)):
        errors[f"{where}.value"] = problem
    return errors


def parse(body) -> list[tuple[int, str, float | None]]:
    """The batch as (step, key, value) tuples; the last of duplicate (step, key) pairs wins."""
    if isinstance(body, dict) and set(body) == {"points"}:
        points, prefix = body["points"], "points"
    elif isinstance(body, list):
        points, prefix = body, "points"
    elif isinstance(body, dict) and "points" in body:  # and more: name each field it does not know
        shape = 'the body is a list of points or {"points": [...]}'
        raise Invalid({key: f"unknown field; {shape}" for key in body if key != "points"})
    else:
        raise Invalid({"body": 'must be a list of points or {"points": [...]}'})
    if not isinstance(points, list):
        raise Invalid({"points": "must be a list"})
    if len(points) > MAX_POINTS:
        raise TooLarge(f"{len(points)} points in one batch; the limit is {MAX_POINTS}: send smaller batches")
    unique, keys = {}, {}
    for point in points:
        parsed = _well_formed(point, keys)
        if parsed is None:
            raise Invalid(_batch_errors(points, prefix))
        step, key, value = parsed
        unique[(step, key)] = value
    return [(step, key, value) for (step, key), value in unique.items()]


def _well_formed(point, keys: dict) -> tuple[int, str, float | None] | None:
    """(step, key, value) of a valid point, else None. The common case of a 1,000-point batch, so plain
    type checks here, and each distinct key checked once (`keys` holds the good ones, with their bounds);
    _point_errors explains a rejection."""
    if type(point) is not dict or point.keys() != FIELDS:
        return None
    step, key, value = _step(point["step"]), point["key"], point["value"]
    if step is None or type(key) is not str:
        return None
    if key not in keys:
        if len(key) > MAX_KEY_LENGTH or key_problem(key):
            return None
        keys[key] = bounds(key)
    if value is None:
        return step, key, value
    if isinstance(value, str):
        return (step, key, NON_FINITE[value]) if value in NON_FINITE else None
    if type(value) is not float:
        if not _is_value(value):
            return None
        value = float(value)
    limits = keys[key]
    return (step, key, value) if limits is None or within(limits, value) else None


def _batch_errors(points: list, prefix: str) -> dict[str, str]:
    errors = {}
    for index, point in enumerate(points):
        errors.update(_point_errors(f"{prefix}[{index}]", point))
        if len(errors) >= MAX_REPORTED_ERRORS:
            break
    return errors


class Written(NamedTuple):
    points: int
    run: Run  # its RUN_STATE fields as its row was locked
    key_count: int  # the keys the run has logged, this batch's included


def write(
    run_id: int,
    points: list[tuple[int, str, float | None]],
    *,
    owner=None,
    finished_ok: bool = False,
    logged_at: dict[tuple[int, str], int] | None = None,
    unstepped: frozenset[str] = frozenset(),
) -> Written:
    """Upsert the points and refresh the run's latest_metrics (the value at each key's highest step); the
    run's heartbeat and step move on (it is heard from, and has reached the batch's last step).
    With owner, only a run of that user is written (else Run.DoesNotExist, as for a run that does not
    exist): the ingest API's ownership check, made under the run's lock instead of in a query of its own.
    Refused when EchoLab trains the run (its experiment is not imported: points from elsewhere would mix
    with its trainer's), or when it is completed, failed or stopped (imported runs are created completed),
    unless finished_ok: a run logged through the MLflow endpoint takes data after it ended, as in MLflow.
    logged_at: {(step, key): when an MLflow client logged the point}, kept with the points; a point
    without one is kept with the time it arrived (every run that takes points from here is an MLflow
    client's, whose history answers each point's time). unstepped: keys whose points are numbered in
    arrival order, not steps: they do not move the run's step. Invalid, writing nothing, when the batch
    would give the run more than MAX_KEYS_PER_RUN keys.
    Returns the points written, the run as this batch left it (its RUN_STATE fields) and its key count."""
    refuse = () if finished_ok else tuple(Run.FINISHED)
    arrived_at = int(time.time() * 1000)
    if owner is not None and not owner.is_authenticated:  # owner=None means "any run": never by accident
        raise Run.DoesNotExist(f"run {run_id} does not exist")
    if connection.vendor == "postgresql":
        # The lock, the checks, the points, their rollups and latest_metrics, in one round trip.
        state, written = MetricPoint.write_batch(
            run_id,
            points,
            owner_id=None if owner is None else owner.pk,
            latest_metrics=True,
            refuse_statuses=refuse,
            trained_elsewhere_only=True,
            logged_at=logged_at,
            arrived_at=arrived_at,
            unstepped=unstepped,
            max_keys=MAX_KEYS_PER_RUN,
        )
        if not state["imported"] or state["status"] in refuse:
            raise _refused(run_id, state["status"], state["host"], state["imported"])
        if points and not written:  # neither refused nor empty: the keys' limit held it back
            logged = Run.objects.values_list("latest_metrics", flat=True).get(pk=run_id)
            raise _too_many_keys(logged, points)
        del state["imported"]
        key_count = state.pop("key_count")
        return Written(written, Run(id=run_id, **state), key_count)
    keys = sorted({key for _, key, _ in points})
    runs = Run.objects if owner is None else Run.objects.for_user(owner)
    with transaction.atomic():
        # The run's row lock first: batches for one run take turns, so they do not overwrite each other's
        # latest_metrics; and a run finishing meanwhile is seen here.
        locked = (
            runs.select_for_update(no_key=True, of=("self",))
            .select_related("experiment")
            .only("latest_metrics", "experiment__imported", *RUN_STATE)
            .get(pk=run_id)
        )
        if not locked.experiment.imported or locked.status in refuse:
            raise _refused(run_id, locked.status, locked.host, locked.experiment.imported)
        if len(locked.latest_metrics.keys() | set(keys)) > MAX_KEYS_PER_RUN:
            raise _too_many_keys(locked.latest_metrics, points)
        rewinds = _rewinds(run_id, points)
        logged_at = logged_at or {}
        stamped = {(step, key): logged_at.get((step, key), arrived_at) for step, key, _ in points}
        written = MetricPoint.upsert(run_id, points, stamped)
        latest = dict(locked.latest_metrics)
        for key, (_, value, _) in MetricPoint.newest(run_id, keys).items():
            # jsonb has no NaN or infinity.
            latest[key] = value if value is not None and math.isfinite(value) else None
        # under the run's lock: the answer's state is the row as this batch leaves it
        locked.step = max([locked.step or 0, *(step for step, key, _ in points if key not in unstepped)])
        locked.rewrites += int(rewinds)
        Run.objects.filter(pk=run_id).update(
            latest_metrics=latest, rewrites=locked.rewrites, heartbeat_at=timezone.now(), step=locked.step
        )
    return Written(written, locked, len(latest))


def _rewinds(run_id: int, points) -> bool:
    """Whether the batch writes at or before some key's newest stored step (as the Postgres statement
    tells for Run.rewrites)."""
    first: dict[str, int] = {}
    for step, key, _ in points:
        first[key] = min(step, first.get(key, step))
    newest = (
        MetricPoint.objects.filter(run_id=run_id, key__in=list(first))
        .values("key")
        .annotate(step=Max("step"))
    )
    return any(row["step"] >= first[row["key"]] for row in newest)


# Run.host of a run logged through the MLflow endpoint (webapp.tracking.models.ExternalRun.HOST).
MLFLOW_HOST = "mlflow client"


def _too_many_keys(logged: dict, points) -> Invalid:
    """The refusal of a batch past MAX_KEYS_PER_RUN. `logged` (the run's latest_metrics) may be read after
    the refusal, when another batch may have logged this one's new keys: then it names none."""
    new = sorted({key for _, key, _ in points} - logged.keys())
    example = f" ({new[0]!r}{', ...' if len(new) > 1 else ''})" if new else ""
    return Invalid(
        {
            "points": f"would add {len(new):,} new key{'s' if len(new) != 1 else ''}{example} to the "
            f"{len(logged):,} this run has logged; "
            f"a run logs at most {MAX_KEYS_PER_RUN:,} distinct keys: keep counters and ids out of key names, "
            "or log to another run"
        }
    )


def _refused(run_id: int, status: str, host: str, imported: bool) -> Refused:
    if not imported:
        return Refused(
            f"run {run_id} is trained by EchoLab ({status}): its metrics come from its worker alone, and "
            "points from elsewhere would mix with them; a script's metrics go to a run it starts with the "
            "mlflow client (README, Runs trained elsewhere)"
        )
    if host == MLFLOW_HOST:  # its MLflow client may log to it again
        return Refused(
            f"run {run_id} is {status}: this endpoint takes no points for a finished run (a lost one runs "
            "again); a run made through the MLflow endpoint takes them there (runs/log-batch), as in MLflow"
        )
    return Refused(
        f"run {run_id} is {status}: a finished run's metrics are final "
        "(its detector events were computed from them); start a new run"
    )
