"""JSON API for a run's metrics, events and samples. Every view is scoped to the caller's runs: a run
that is not theirs is a 404, exactly like one that does not exist."""

from django.db import transaction
from django.http import Http404, StreamingHttpResponse
from django.utils import timezone

from diagnostics.metrics import TRAIN_REWARD_STD_HIST
from webapp.accounts.api_auth import ApiError, api_view, int_param, json_body
from webapp.core.json_response import JsonResponse
from webapp.experiments.models import Run
from webapp.metrics import export, ingest
from webapp.metrics.downsample import Steps, clock_sums, finite_or_none, load_series
from webapp.metrics.models import Sample, StepRecord
from webapp.runs.owned import NOT_FOUND, owned_run
from webapp.tracking.models import ExternalRun

HIST_BINS = 20  # the heat strip's std bins, equal width from 0 to the run's largest value
DEFAULT_MAX_POINTS = 1000
MAX_MAX_POINTS = 20_000
MAX_KEYS = 100


def run_state(run: Run, key_count: int | None = None) -> dict:
    """What a polling page needs to draw progress and to know when to stop. `key_count` when known
    without run.latest_metrics (an ingest answer's run holds only its state columns)."""
    return {
        "id": run.pk,
        "status": run.status,
        "finished": run.is_finished,
        "step": run.step,
        "total_steps": run.total_steps,
        "progress_percent": run.progress_percent,
        "eta_seconds": finite_or_none(run.eta),
        "error": run.error,
        "host": run.host,
        "device": run.device,
        "attempt": run.attempt,
        "rewrites": run.rewrites,
        "stop_requested": run.stop_requested,
        "key_count": len(run.latest_metrics or {}) if key_count is None else key_count,
    }


@api_view(methods=("GET", "POST"), repeatable=("key",))
def metrics(request, pk):
    if request.method == "POST":
        return _ingest(request, pk)  # which checks ownership in the write, under the run's lock
    return _query(request, owned_run(request, pk))


def requested_keys(request, default: list[str]) -> list[str]:
    """The keys a query names: `?key=` (repeatable, one key exactly as logged, so it may hold a comma or
    spaces) and `?keys=a,b` (comma-separated, each trimmed), in that order, duplicates dropped; `default`
    when neither names one. At most MAX_KEYS."""
    exact = request.GET.getlist("key")
    if any(not key for key in exact):
        raise ApiError.field("key", "must not be empty")
    listed = [key.strip() for key in request.GET.get("keys", "").split(",") if key.strip()]
    if "keys" in request.GET and not listed:  # given, but naming no key: a 400, as a parameter given empty
        raise ApiError.field("keys", "name at least one key (leave keys out for every key)")
    keys = list(dict.fromkeys([*exact, *listed]))
    if not keys and len(default) > MAX_KEYS:
        raise ApiError.field(
            "keys",
            f"name the keys: there are {len(default)}, and a request takes at most {MAX_KEYS} "
            "(a run's keys are those of its latest_metrics, GET /api/runs/{id})",
        )
    keys = keys or default
    if len(keys) > MAX_KEYS:
        raise ApiError.field("keys", f"at most {MAX_KEYS} keys per request, got {len(keys)}")
    for key in keys:
        if len(key) > ingest.MAX_KEY_LENGTH or "\x00" in key:
            name = "key" if key in exact else "keys"
            raise ApiError.field(name, f"each key is at most {ingest.MAX_KEY_LENGTH} characters, without NUL")
    return keys


def step_range(request) -> tuple[int | None, int | None]:
    """?after= (a poll's last step held) and ?through= (a zoom's last step): the steps a query reads."""
    after = int_param(request, "after", None, low=-1, high=ingest.MAX_STEP)
    through = int_param(request, "through", None, low=0, high=ingest.MAX_STEP)
    if after is not None and through is not None and through <= after:
        raise ApiError.field("through", f"must be above after ({after}), got {through}")
    return after, through


def _query(request, run: Run):
    keys = requested_keys(request, sorted(run.latest_metrics))
    max_points = int_param(request, "max_points", DEFAULT_MAX_POINTS, low=2, high=MAX_MAX_POINTS)
    after, through = step_range(request)
    series = load_series(run.pk, keys, after=after, max_points=max_points, through=through)
    clock = series.get(run.clock_key)
    if clock is not None and clock.downsampled:
        clock.sums = clock_sums(run.pk, run.clock_key, clock, Steps(after, through))
    heard = None if run.heartbeat_at is None else (timezone.now() - run.heartbeat_at).total_seconds()
    return JsonResponse(
        {
            "run": run_state(run),
            "after": after,
            "through": through,
            "max_points": max_points,
            "series": {key: s.as_json() for key, s in series.items()},
            "heard_seconds_ago": heard,
        }
    )


def _ingest(request, pk: int):
    declared = request.META.get("CONTENT_LENGTH") or "0"
    if declared.isascii() and declared.isdigit() and int(declared) > ingest.MAX_BODY_BYTES:
        raise ApiError.field(
            "body",
            f"{declared} bytes; the limit is {ingest.MAX_BODY_BYTES}: "
            f"send at most {ingest.MAX_POINTS} points per request",
            413,
        )
    body = json_body(request, max_bytes=ingest.MAX_BODY_BYTES, items="points")
    try:
        points = ingest.parse(body)
    except ingest.TooLarge as error:
        raise ApiError.field("body", str(error), 413) from None
    except ingest.Invalid as error:
        raise ApiError(400, error.message, error.errors) from None
    try:
        written = _write_resuming(request, pk, points)
    except Run.DoesNotExist:
        raise Http404(NOT_FOUND) from None
    except ingest.Invalid as error:  # more keys than a run may log
        raise ApiError(400, error.message, error.errors) from None
    except ingest.Refused as error:
        raise ApiError(409, str(error)) from None
    ExternalRun.ingested(written.run, points)
    return JsonResponse({"written": written.points, "run": run_state(written.run, written.key_count)})


def _write_resuming(request, pk: int, points):
    """_write; a lost MLflow run (its client went quiet and the sweeper marked it failed) runs again first,
    as its client's next call would make it (a script may log through both), in one transaction with the
    write: a batch refused even so leaves it lost."""
    try:
        return _write(request, pk, points)
    except ingest.Refused:
        with transaction.atomic():
            if not ExternalRun.resume_lost(request.user, pk):
                raise
            return _write(request, pk, points)


def _write(request, pk: int, points):
    """ingest.write, with another trainer's names for our keys named as the run's MLflow client names them
    (ExternalRun.api_points: a script may log through both)."""
    if not ExternalRun.renames_any(points):
        return ingest.write(pk, points, owner=request.user)
    with transaction.atomic():
        external = ExternalRun.objects.for_user(request.user).filter(pk=pk).first()
        if external is not None:
            points = external.api_points(points)
        return ingest.write(pk, points, owner=request.user)


@api_view()
def export_metrics(request, pk):
    run = owned_run(request, pk)
    fmt = request.GET.get("format", "csv")
    if fmt not in export.FORMATS:
        raise ApiError.field("format", f"must be one of {', '.join(export.FORMATS)}, got {fmt[:20]!r}")
    response = StreamingHttpResponse(export.lines(run.pk, fmt), content_type=export.FORMATS[fmt])
    response["Content-Disposition"] = f'attachment; filename="run-{run.pk}-metrics.{fmt}"'
    return response


@api_view()
def events(request, pk):
    run = owned_run(request, pk)
    rows = run.events.values("id", "step", "level", "rule", "message", "signals", "created_at")
    return JsonResponse({"run": run_state(run), "events": list(rows)})


@api_view()
def samples(request, pk):
    run = owned_run(request, pk)
    steps = list(Sample.objects.filter(run=run).order_by("step").values_list("step", flat=True).distinct())
    step = int_param(request, "step", steps[-1] if steps else None, low=0, high=ingest.MAX_STEP)
    rows = Sample.objects.filter(run=run, step=step).values("index", "data") if step is not None else []
    return JsonResponse({"run": run_state(run), "steps": steps, "step": step, "samples": list(rows)})


def histogram_strip(rows: list[tuple[int, list]], bins: int = HIST_BINS) -> dict:
    """(step, values) rows -> per step, how many values fall in each of `bins` equal bins from 0 to the
    largest finite value of the run (the last bin closed); non-finite values are left out."""
    finite = [
        [v for v in values if v is not None and v == v and abs(v) != float("inf")] for _, values in rows
    ]
    top = max((max(values) for values in finite if values), default=0.0) or 1.0
    edges = [top * i / bins for i in range(bins + 1)]
    counts = []
    for values in finite:
        row = [0] * bins
        for value in values:
            row[min(max(int(value / top * bins), 0), bins - 1)] += 1
        counts.append(row)
    return {"steps": [step for step, _ in rows], "bin_edges": edges, "counts": counts}


@api_view()
def reward_std_hist(request, pk):
    """Every group's in-group reward std per step (train/reward_std_hist), binned for the heat strip."""
    run = owned_run(request, pk)
    rows = list(
        StepRecord.objects.filter(run=run, key=TRAIN_REWARD_STD_HIST)
        .order_by("step")
        .values_list("step", "values")
    )
    return JsonResponse({"run": run_state(run), "key": TRAIN_REWARD_STD_HIST, **histogram_strip(rows)})
