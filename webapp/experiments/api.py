"""JSON API for experiments (documented in webapp/core/openapi.yaml, served at /api/schema)."""

from django.core.paginator import Paginator
from django.http import HttpResponse

from webapp.accounts.api_auth import ApiError, api_view, int_param, json_body, no_body
from webapp.core.json_response import JsonResponse
from webapp.experiments import run_planning, spec_parsing, specs
from webapp.experiments.models import Experiment, Run

MAX_PAGE_SIZE = 200
MAX_PAGE = 2**31 - 1  # as the runs table's page


def _page(request, queryset, serialize):
    size = int_param(request, "page_size", 50, low=1, high=MAX_PAGE_SIZE)
    number = int_param(request, "page", 1, low=1, high=MAX_PAGE)  # past the last page: an empty page
    paginator = Paginator(queryset, size)
    items = paginator.page(number).object_list if number <= paginator.num_pages else []
    return JsonResponse(
        {
            "count": paginator.count,
            "page": number,
            "page_size": size,
            "results": [serialize(item) for item in items],
        }
    )


@api_view(methods=("GET", "POST"))
def experiments(request):
    if request.method == "POST":
        spec, errors = spec_parsing.read_experiment(json_body(request))
        try:
            if errors:
                raise specs.SpecError(run_planning.every_problem(spec, errors))
            experiment = Experiment.create_with_runs(request.user, spec)
        except specs.SpecError as error:
            raise ApiError(400, "invalid experiment: " + str(error), error.errors) from None
        return JsonResponse(experiment.to_dict(runs=experiment.runs.all()), status=201)
    return _page(request, Experiment.objects.for_user(request.user), lambda e: e.to_dict())


ALERT_FIELDS = ("alert_recipients", "alert_on_warnings")


@api_view(methods=("GET", "PATCH", "DELETE"))
def experiment(request, pk):
    experiment = Experiment.objects.for_user(request.user).filter(pk=pk).first()
    if experiment is None:  # the same words for another user's experiment, as for a run
        raise ApiError(404, "experiment not found")
    if request.method == "DELETE":
        no_body(request)
        try:
            experiment.delete_with_runs()
        except Run.StillTraining as error:
            raise ApiError(409, str(error)) from None
        return HttpResponse(status=204)
    if request.method == "PATCH":
        _set_alerts(experiment, json_body(request))
    return JsonResponse(experiment.to_dict(runs=experiment.runs.all()))


def _set_alerts(experiment: Experiment, body) -> None:
    """PATCH: the alert settings, the one part of an experiment that changes after it is created."""
    if not isinstance(body, dict) or not body:
        raise ApiError.field("body", f"must be an object with {' and/or '.join(ALERT_FIELDS)}")
    errors = {
        key: f"unknown field; only {', '.join(ALERT_FIELDS)} can change"
        for key in body
        if key not in ALERT_FIELDS
    }
    try:
        recipients = spec_parsing.parse_recipients(
            body.get("alert_recipients", experiment.listed_recipients())
        )
    except ValueError as error:
        errors["alert_recipients"] = str(error)
    on_warnings = body.get("alert_on_warnings", experiment.alert_on_warnings)
    if not isinstance(on_warnings, bool):
        errors["alert_on_warnings"] = "must be true or false"
    if errors:
        raise ApiError.fields(errors)
    try:
        experiment.set_alerts(recipients, on_warnings)
    except Experiment.NotAlerted as error:
        raise ApiError(409, str(error)) from None
