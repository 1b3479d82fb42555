"""The runs table across a user's experiments, a run's name, tags and notes, soft archiving, and the
CSV export of several runs' metrics. Every queryset is the user's own: another user's run is a 404."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseBadRequest, HttpResponseNotFound, StreamingHttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from webapp.compare import selection
from webapp.experiments.models import Run
from webapp.metrics import export
from webapp.runs import queue, table
from webapp.runs.forms import RunEditForm, RunTableForm

PAGE_SIZE = 50
MAX_EXPORT_RUNS = 100


def _owned_run(request, pk) -> Run:
    return get_object_or_404(Run.objects.for_user(request.user).select_related("experiment"), pk=pk)


def _back(request, fallback: str):
    """Where to return after an action: the `next` the form carried (this site only), else fallback."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


@login_required
@require_GET
def run_list(request):
    form = RunTableForm(request.GET)
    context = {
        "form": form,
        "columns": table.COLUMNS,
        "choices": table.choices(Run.objects.for_user(request.user)),
    }
    if not form.is_valid():
        return render(request, "runs/list.html", context, status=400)
    with table.without_jit():
        page = form.paginator(request.user, PAGE_SIZE).get_page(form.cleaned_data["page"])
        page.object_list = list(page.object_list)
    places = queue.positions(run.pk for run in page.object_list if run.status == Run.Status.QUEUED)
    for run in page.object_list:
        run.queue_position = places.get(run.pk)
    query = request.GET.copy()
    query.pop("page", None)
    sort_query = query.copy()
    sort_query.pop("sort", None)
    return render(
        request,
        "runs/list.html",
        {
            **context,
            "page": page,
            "sort": form.sort_key,
            "archived": form.archived_view,
            "query_without_page": query.urlencode(),
            "query_without_sort": sort_query.urlencode(),
            "headers": table.headers(form.sort_key),
            "waits_for": queue.waits_for(),
            "filtered": any(form.cleaned_data[name] for name in RunTableForm.FILTERS),
            "next": request.get_full_path(),
        },
    )


@login_required
def run_edit(request, pk):
    run = _owned_run(request, pk)
    form = RunEditForm(request.POST or None, instance=run)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, f"Saved {run.display_name}.")
        return redirect(_back(request, reverse("run_list")))
    return render(
        request,
        "runs/edit.html",
        {"run": run, "form": form, "next": _back(request, "")},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def run_archive(request, pk):
    run = _owned_run(request, pk)
    run.archive()
    messages.success(
        request, f"Archived {run.display_name}: it is listed under Archived, where you can restore it."
    )
    return redirect(_back(request, reverse("run_list")))


@login_required
@require_POST
def run_restore(request, pk):
    run = _owned_run(request, pk)
    run.restore()
    messages.success(request, f"Restored {run.display_name}.")
    return redirect(_back(request, reverse("run_list") + "?archived=true"))


@login_required
@require_GET
def runs_export(request):
    """GET /runs/export.csv?runs=3,7,12: the runs' metrics in one CSV (webapp.metrics.export)."""
    ids, invalid = selection.split_ids(request.GET.getlist("runs"))
    if invalid:
        return HttpResponseBadRequest(
            f"runs: {invalid[0]!r} is not a run id (expected runs=3,7,12)", content_type="text/plain"
        )
    if not ids or len(ids) > MAX_EXPORT_RUNS:
        return HttpResponseBadRequest(
            f"runs: select between 1 and {MAX_EXPORT_RUNS} runs to export", content_type="text/plain"
        )
    found = Run.objects.for_user(request.user).select_related("experiment").in_bulk(ids)
    missing = [pk for pk in ids if pk not in found]
    if missing:
        return HttpResponseNotFound(
            f"runs: run {missing[0]} is not among your runs", content_type="text/plain"
        )
    response = StreamingHttpResponse(
        export.runs_csv_lines([found[pk] for pk in ids]), content_type=export.FORMATS["csv"]
    )
    response["Content-Disposition"] = f'attachment; filename="runs-{"-".join(map(str, ids[:10]))}.csv"'
    return response
