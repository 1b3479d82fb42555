"""JSON API for experiments (documented in webapp/core/openapi.yaml, served at /api/schema)."""

from django.core.paginator import Paginator
from django.shortcuts import get_object_or_404

from webapp.accounts.api_auth import ApiError, api_view, json_body
from webapp.core.json_response import JsonResponse
from webapp.experiments import spec_parsing, specs
from webapp.experiments.models import Experiment

MAX_PAGE_SIZE = 200


def _page(request, queryset, serialize):
    try:
        size = int(request.GET.get("page_size", 50))
        number = int(request.GET.get("page", 1))
    except ValueError:
        raise ApiError(400, "page and page_size must be whole numbers") from None
    if not 1 <= size <= MAX_PAGE_SIZE or number < 1:
        raise ApiError(400, f"page must be >= 1 and page_size between 1 and {MAX_PAGE_SIZE}")
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
        try:
            spec = spec_parsing.spec_from_json(json_body(request))
            experiment = Experiment.create_with_runs(request.user, spec)
        except specs.SpecError as error:
            raise ApiError(400, "invalid experiment: " + str(error), error.errors) from None
        return JsonResponse(experiment.to_dict(runs=experiment.runs.all()), status=201)
    return _page(request, Experiment.objects.for_user(request.user), lambda e: e.to_dict())


@api_view()
def experiment(request, pk):
    experiment = get_object_or_404(Experiment.objects.for_user(request.user), pk=pk)
    return JsonResponse(experiment.to_dict(runs=experiment.runs.all()))
