"""JSON API for runs (documented in webapp/core/openapi.yaml, served at /api/schema): GET /api/runs, the
runs table; GET /api/runs/<id>, one run with its config; POST /api/runs/<id>/stop. A run's metrics,
events and samples are webapp.metrics.api's."""

from django.http import JsonResponse

from webapp.accounts.api_auth import ApiError, api_view
from webapp.runs import queue, table
from webapp.runs.forms import RunTableForm
from webapp.runs.owned import owned_run

DEFAULT_PAGE_SIZE = 50


@api_view()
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
            "results": [table.row(run, places.get(run.pk)) for run in items],
        }
    )


@api_view()
def run(request, pk):
    run = owned_run(request, pk)
    return JsonResponse(run.to_dict(config=True))


@api_view(methods=("POST",))
def run_stop(request, pk):
    run = owned_run(request, pk)
    run.request_stop()
    return JsonResponse(run.to_dict())
