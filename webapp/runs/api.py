"""JSON API for runs (documented in webapp/core/openapi.yaml, served at /api/schema): GET /api/runs, the
runs table; GET /api/runs/<id>, one run with its config, PATCH, its name, tags, notes and archived state,
and DELETE, the run with its data; POST
/api/runs/<id>/stop; GET /api/runs/<id>/detector-inputs, the series each detector rule judged. A run's
metrics, events and samples are webapp.metrics.api's."""

from django.db import transaction
from django.http import HttpResponse

from diagnostics import Detector, replay_inputs
from diagnostics.detector import stored_reads
from webapp.accounts.api_auth import ApiError, api_view, json_body, no_body
from webapp.core import jsonsafe
from webapp.core.json_response import JsonResponse
from webapp.experiments import spec_parsing
from webapp.experiments.models import Run
from webapp.metrics.api import run_state
from webapp.metrics.downsample import finite_or_none_list
from webapp.metrics.export import run_keys
from webapp.metrics.models import MetricPoint
from webapp.runs import queue, table
from webapp.runs.forms import RunEditForm, RunTableForm
from webapp.runs.owned import owned_run

DEFAULT_PAGE_SIZE = 50
# The most stored points of the detector's keys (detector.stored_reads) that one detector-inputs request replays:
# 10,000 steps of a run logging ten of them, about a second of database and Python (measured: see
# docs/DETECTOR.md). A longer run is refused, not cut short: a partial replay quotes different values.
MAX_REPLAY_POINTS = 100_000
# Detector overrides tried on a run (?overrides=) ride in the address: a page of a dozen rules' parameters.
MAX_TRIED_OVERRIDES = 3000


@api_view(repeatable=("config",))
def runs(request):
    empty = [name for name, value in request.GET.items() if value == "" and name in RunTableForm.base_fields]
    if empty:
        raise ApiError(
            400,
            f"{empty[0]}: is empty; leave the parameter out instead",
            {name: "is empty; leave the parameter out instead" for name in empty},
        )
    form = RunTableForm(request.GET)
    if not form.is_valid():
        errors = {field: " ".join(messages) for field, messages in form.errors.items()}
        raise ApiError(400, form.error_summary(), errors)
    paginator = form.paginator(request.user, DEFAULT_PAGE_SIZE)
    number = form.cleaned_data["page"] or 1
    with table.without_jit():
        items = list(paginator.page(number).object_list) if number <= paginator.num_pages else []
    places = queue.positions(run.pk for run in items if run.status == run.Status.QUEUED)
    return JsonResponse(
        {
            "count": paginator.count,
            "page": number,
            "page_size": paginator.per_page,
            "results": [table.row(run, places.get(run.pk), form.cleaned_data["config"]) for run in items],
        }
    )


@api_view(methods=("GET", "PATCH", "DELETE"))
def run(request, pk):
    run = owned_run(request, pk)
    if request.method == "DELETE":
        no_body(request)
        try:
            run.delete_with_data()
        except Run.StillTraining as error:
            raise ApiError(409, str(error)) from None
        return HttpResponse(status=204)
    if request.method == "PATCH":
        run = _edit(run, json_body(request))
    return JsonResponse(run.to_dict(config=True))


EDITABLE = ("name", "tags", "notes", "archived")


def _edit(run: Run, body) -> Run:
    """PATCH: what a person edits on the run's page (name, tags, notes, through the same form) and whether
    it is archived; the fields left out keep their values. All or nothing."""
    if not isinstance(body, dict) or not body:
        raise ApiError.field("body", f"must be an object with any of {', '.join(EDITABLE)}")
    errors = {
        key: f"unknown field; only {', '.join(EDITABLE)} can change" for key in body if key not in EDITABLE
    }
    for key in ("name", "notes"):
        if key in body and not isinstance(body[key], str):
            errors[key] = f"must be a string, got {jsonsafe.json_type(body[key])}"
    tags = body.get("tags", run.tags)
    if not (isinstance(tags, list) and all(isinstance(tag, str) for tag in tags)):
        errors["tags"] = (
            f'must be a list of tags, like ["baseline", "sweep-3"], got {jsonsafe.json_type(tags)}'
        )
    archived = body.get("archived", run.archived_at is not None)
    if not isinstance(archived, bool):
        errors["archived"] = "must be true or false"
    if errors:
        raise ApiError.fields(errors)
    form = RunEditForm(
        {"name": body.get("name", run.name), "tags": tags, "notes": body.get("notes", run.notes)},
        instance=run,
    )
    if not form.is_valid():
        raise ApiError.fields({field: " ".join(problems) for field, problems in form.errors.items()})
    with transaction.atomic():
        run = form.save()
        if archived and run.archived_at is None:
            run.archive()
        elif not archived and run.archived_at is not None:
            run.restore()
    return run


@api_view(methods=("POST",))
def run_stop(request, pk):
    run = owned_run(request, pk)
    no_body(request)
    try:
        run.request_stop()
    except Run.TrainedElsewhere as error:
        raise ApiError(409, str(error)) from None
    return JsonResponse(run.to_dict())


@api_view(methods=("POST",))
def run_resume(request, pk):
    run = owned_run(request, pk)
    no_body(request)
    try:
        run.resume()
    except (Run.TrainedElsewhere, Run.NotResumable) as error:
        raise ApiError(409, str(error)) from None
    return JsonResponse(run.to_dict())


@api_view()
def detector_inputs(request, pk):
    """Replay the run's stored metrics through the detector, with its experiment's overrides (or those of
    ?overrides=, to try other settings: nothing is stored or sent), and return the series each rule judged
    (the values its events quote, step by step) and the events the replay gives."""
    run = owned_run(request, pk)
    tried = "overrides" in request.GET
    if tried:
        if len(request.GET["overrides"]) > MAX_TRIED_OVERRIDES:
            raise ApiError.field("overrides", f"is longer than {MAX_TRIED_OVERRIDES:,} characters")
        try:
            overrides = spec_parsing.check_detector_overrides(
                spec_parsing.parse_mapping(request.GET["overrides"], "{reward_std_drop: {ratio: 0.3}}")
            )
        except ValueError as error:
            raise ApiError.field("overrides", str(error)) from None
    keys = stored_reads(run_keys(run.pk))
    points = MetricPoint.objects.filter(run=run, key__in=keys)
    if points[: MAX_REPLAY_POINTS + 1].count() > MAX_REPLAY_POINTS:
        raise ApiError(
            422,
            f"run {run.pk} has more than {MAX_REPLAY_POINTS:,} points of the metrics the detector reads; "
            f"the detector's view replays at most that many (its events are listed all the same)",
        )
    history = MetricPoint.steps(run.pk, keys=keys)
    if not tried:
        overrides = run.experiment.detector_overrides or {}
        try:
            Detector(overrides)
        except ValueError as error:  # overrides saved before a rule or parameter was renamed
            raise ApiError(422, f"the experiment's detector overrides are rejected: {error}") from None
    events, inputs = replay_inputs(history, overrides)
    for entry in inputs:
        entry["value"] = finite_or_none_list(entry["value"])
    events = [{**event, "signals": jsonsafe.jsonb_safe(event.get("signals", {}))} for event in events]
    return JsonResponse(
        {
            "run": run_state(run),
            "steps": len(history),
            "overrides": overrides,
            "rules": inputs,
            "events": events,
        }
    )
