"""A run's pages: its live charts and status (run_detail), stop, delete, and the sampled trajectories; the
runs table across a user's experiments, a run's name, tags and notes, soft archiving, and the CSV export
of several runs' metrics. Every queryset is the user's own: another user's run is a 404 (owned_run)."""

import yaml
from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse, HttpResponseBadRequest, StreamingHttpResponse
from django.shortcuts import redirect, render
from django.template.defaultfilters import pluralize
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_http_methods, require_POST, require_safe

from trainer.overrides import get_dotted
from webapp.alerts.models import Notification
from webapp.compare import selection
from webapp.core import chart_view
from webapp.core.live_parts import page_or_part
from webapp.experiments.models import Run
from webapp.metrics import export
from webapp.metrics.ingest import MAX_STEP, MLFLOW_HOST
from webapp.metrics.models import MetricRollup, Sample
from webapp.runs import queue, table
from webapp.runs.charts import chart_sections
from webapp.runs.forms import MAX_PAGE_SIZE, RunEditForm, RunTableForm, TrajectoryFilterForm
from webapp.runs.owned import owned_run
from webapp.runs.trajectories import board_legend, nearest_sampled, success_means, trajectory
from webapp.tracking.artifacts import Artifact

PAGE_SIZE = 50
PAGE_SIZES = (PAGE_SIZE, 100, MAX_PAGE_SIZE)  # the runs page's "Rows per page"
ARTIFACTS_SHOWN = 200  # an MLflow run's files listed on its page (a checkpoint folder can hold thousands)
MAX_EXPORT_RUNS = 100
MAX_SELECTED_RUNS = 1000  # archived or restored at once from the runs table's selection


def _back(request, fallback: str):
    """Where to return after an action: the `next` the form carried (this site only), else fallback."""
    target = request.POST.get("next") or request.GET.get("next") or ""
    if url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        return target
    return fallback


@login_required
@require_safe
def run_list(request):
    form = RunTableForm(request.GET)
    runs = Run.objects.for_user(request.user)
    context = {
        "form": form,
        "columns": table.COLUMNS,
        "choices": table.choices(runs),
        "config_paths": table.config_paths(runs),
        "page_sizes": PAGE_SIZES,
    }
    if not form.is_valid():
        return render(request, "runs/list.html", context, status=400)
    experiment = form.cleaned_data["experiment"]
    if experiment and experiment not in dict(context["choices"]["experiment"]):
        # Said in the filter, as the empty table's cause: a deleted experiment's link, or another user's
        context["choices"]["experiment"].append((experiment, f"experiment {experiment}: none of your runs"))
    with table.without_jit():
        page = form.paginator(request.user, PAGE_SIZE).get_page(form.cleaned_data["page"])
        page.object_list = list(page.object_list)
    places = queue.positions(run.pk for run in page.object_list if run.status == Run.Status.QUEUED)
    config_columns = form.cleaned_data["config"]
    for run in page.object_list:
        run.queue_position = places.get(run.pk)
        run.config_cells = [table.config_value(run.config, path) for path in config_columns]
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
            # a size the address asks for stays chosen: the next Filter keeps it
            "page_sizes": sorted({*PAGE_SIZES, page.paginator.per_page}),
            "sort": form.sort_key,
            "archived": form.archived_view,
            "max_export": MAX_EXPORT_RUNS,
            "max_selected": MAX_SELECTED_RUNS,
            "query_without_page": query.urlencode(),
            "query_without_sort": sort_query.urlencode(),
            "headers": table.headers(form.sort_key),
            "config_headers": [
                {**header, "remove": _without_column(query, header["path"])}
                for header in table.config_headers(config_columns, form.sort_key)
            ],
            "empty_colspan": len(table.COLUMNS) + len(config_columns) + 2,  # the ticks' and actions' columns
            # A config column no run shown has: most likely a path mistyped, said rather than a column of dashes
            "config_columns_empty": [
                path
                for index, path in enumerate(config_columns)
                if page.object_list and all(run.config_cells[index] is None for run in page.object_list)
            ],
            "query_pairs": [(name, value) for name, values in query.lists() for value in values],
            "max_config_path": table.MAX_CONFIG_PATH,
            "waits_for": queue.waits_for(),
            "filtered": any(form.cleaned_data[name] for name in RunTableForm.FILTERS),
            "deleted_runs": request.session.pop("runs_deleted", []),
            "next": request.get_full_path(),
        },
    )


def _without_column(query, path: str) -> str:
    """The query string less the config column `path`, and less its sort."""
    less = query.copy()
    less.setlist("config", [item for item in query.getlist("config") if item != path])
    if less.get("sort", "").removeprefix("-") == table.CONFIG_SORT + path:
        less.pop("sort")
    return less.urlencode()


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def run_edit(request, pk):
    run = owned_run(request, pk)
    # The form edits a copy: a refused edit would leave its values on `run`, which the page shows as saved.
    form = RunEditForm(request.POST or None, instance=owned_run(request, pk))
    if request.method == "POST" and form.is_valid():
        run = form.save()
        messages.success(request, f"Saved {run.display_name}.")
        return redirect(_back(request, run.get_absolute_url()))
    return render(
        request,
        "runs/edit.html",
        {"run": run, "form": form, "next": _back(request, "")},
        status=400 if form.errors else 200,
    )


@login_required
@require_POST
def run_archive(request, pk):
    run = owned_run(request, pk)
    run.archive()
    messages.success(
        request, f"Archived {run.display_name}: it is listed under Archived, where you can restore it."
    )
    return redirect(_back(request, reverse("run_list")))


@login_required
@require_POST
def runs_archive_selected(request):
    """The runs table's "Archive N selected" (and, in its Archived view, "Restore N selected"): every run
    named, all the user's, or none changed and the refusal shown."""
    action = request.POST.get("action", "")
    restore = action == "restore"
    fallback = reverse("run_list") + ("?archived=true" if restore else "")
    try:
        if action not in ("archive", "restore"):
            raise selection.Refused(400, f"action: expected archive or restore, got {action[:40]!r}")
        runs = selection.every_run(request.user, request.POST.getlist("runs"), MAX_SELECTED_RUNS)
    except selection.Refused as refusal:
        messages.error(request, f"Nothing {'restored' if restore else 'archived'}: {refusal}")
        return redirect(_back(request, fallback))
    chosen = Run.objects.filter(pk__in=[run.pk for run in runs])
    changed = chosen.restore() if restore else chosen.archive()
    names = _names(runs)
    verb = "Restored" if restore else "Archived"

    def state(count: int) -> str:
        return f"{pluralize(count, 'was,were')} {'not archived' if restore else 'archived already'}"

    if not changed:
        plural = pluralize(len(runs))
        messages.info(
            request, f"Nothing {verb.lower()}: the selected run{plural} {state(len(runs))}: {names}."
        )
        return redirect(_back(request, fallback))
    if changed == len(runs):
        counted = f"{changed} selected run{pluralize(changed)}"
    else:
        rest = len(runs) - changed
        counted = f"{changed} of the {len(runs)} selected runs (the other{pluralize(rest)} {state(rest)})"
    listed = pluralize(changed, "It is,They are")
    where = (
        ""
        if restore
        else f" {listed} listed under Archived, where {pluralize(changed, 'it,they')} can be restored."
    )
    messages.success(request, f"{verb} {counted}: {names}.{where}")
    return redirect(_back(request, fallback))


@login_required
@require_POST
def runs_delete_selected(request):
    """The Archived view's "Delete N selected": every run named deleted for good with its data, or none and
    the refusal shown. Only archived runs: the selection is shared with the Active view (and Compare), and
    a run ticked there is deleted only after it was archived, a step that can be undone."""
    fallback = reverse("run_list") + "?archived=true"
    try:
        runs = selection.every_run(request.user, request.POST.getlist("runs"), MAX_SELECTED_RUNS)
        active = [run for run in runs if run.archived_at is None]
        if active:
            raise selection.Refused(
                400,
                f"{_names(active)} {pluralize(len(active), 'is,are')} not archived. Only archived runs are "
                f"deleted from here: archive {pluralize(len(active), 'it,them')} first, or untick "
                f"{pluralize(len(active), 'it,them')}.",
            )
        # archived_at again under the delete's row locks: a run restored since the check above stays
        deleted = Run.objects.filter(
            pk__in=[run.pk for run in runs], archived_at__isnull=False
        ).delete_with_data()
    except selection.Refused as refusal:
        messages.error(request, f"Nothing deleted: {refusal}")
        return redirect(_back(request, fallback))
    except Run.StillTraining as refusal:
        messages.error(request, f"Nothing deleted: {refusal}.")
        return redirect(_back(request, fallback))
    # The page after drops them from the selection (runs_table.js), kept in the browser across pages.
    request.session["runs_deleted"] = [run.pk for run in runs]
    messages.success(
        request,
        f"Deleted {deleted} selected run{pluralize(deleted)} for good, with their metrics, samples and "
        f"detector events: {_names(runs)}.",
    )
    return redirect(_back(request, fallback))


def _names(runs: list[Run]) -> str:
    """The first three runs' names, and how many more."""
    return ", ".join(run.display_name for run in runs[:3]) + (
        f" and {len(runs) - 3} more" if len(runs) > 3 else ""
    )


@login_required
@require_POST
def run_restore(request, pk):
    run = owned_run(request, pk)
    run.restore()
    messages.success(request, f"Restored {run.display_name}.")
    return redirect(_back(request, reverse("run_list") + "?archived=true"))


@login_required
@require_POST
def run_delete(request, pk):
    run = owned_run(request, pk)
    try:
        run.delete_with_data()
    except Run.StillTraining as refusal:
        messages.error(request, f"Not deleted: {refusal}.")
        return redirect(run)
    messages.success(request, f"Deleted {run.display_name} with its metrics, samples and detector events.")
    return redirect(run.experiment)


@login_required
@require_safe
def runs_export(request):
    """GET /runs/export.csv?runs=3,7,12: the runs' metrics in one CSV (webapp.metrics.export)."""
    try:
        runs = selection.every_run(request.user, request.GET.getlist("runs"), MAX_EXPORT_RUNS)
    except selection.Refused as refusal:
        return HttpResponse(str(refusal), status=refusal.status, content_type="text/plain")
    response = StreamingHttpResponse(export.runs_csv_lines(runs), content_type=export.FORMATS["csv"])
    names = "-".join(str(run.pk) for run in runs[:10])
    response["Content-Disposition"] = f'attachment; filename="runs-{names}.csv"'
    return response


def _step_param(request, instead: str) -> tuple[int | None, str]:
    """?step=N as (N, "") or (None, a message naming the problem and saying what is shown `instead`);
    absent is (None, "")."""
    text = request.GET.get("step", "").strip()
    if not text:
        return None, ""
    if not (text.isascii() and text.isdigit()) or int(text) > MAX_STEP:  # "²" and "٣" are digits too
        quoted = repr(text) if len(text) <= 24 else repr(text[:24]) + "..."
        return None, f"step: expected a whole number from 0 to {MAX_STEP}, got {quoted}; showing {instead}"
    return int(text), ""


def _collapse_every(config) -> int | None:
    """The trainer's diagnostics.collapse_every for a run of ours; None for a config without our
    trainer's diagnostics section (an import, an MLflow run's params)."""
    diagnostics = config.get("diagnostics") if isinstance(config, dict) else None
    if not isinstance(diagnostics, dict):
        return None
    every = diagnostics.get("collapse_every", 5)
    return every if isinstance(every, int) and not isinstance(every, bool) else None


@login_required
@require_safe
def run_detail(request, pk):
    run = owned_run(request, pk)
    template = page_or_part(request, "runs/detail.html", alerts="runs/_alert_delivery.html")
    if isinstance(template, HttpResponseBadRequest):
        return template
    if template != "runs/detail.html":  # the alert emails alone, every few seconds while the page is open
        return render(request, template, {"run": run, **_alert_emails(run)})
    cursor, step_error = _step_param(request, "the whole run")
    mlflow_run = getattr(run, "mlflow", None)
    # The last step logged (a native run's step counts steps done: its last logged one is step - 1); a
    # run still going may reach total_steps - 1.
    logged = MetricRollup.last_logged_step(run.pk)
    last = max(logged if logged is not None else 0, 0 if run.is_finished else (run.total_steps or 0) - 1)
    if (
        cursor is not None and cursor > last
    ):  # a cursor far past the run would squash its curves into a corner
        cursor, step_error = None, f"step: this run ends at step {last}, got {cursor}; showing the whole run"
    sections = chart_sections(run)
    page = {
        "run": run.pk,
        "finished": run.is_finished,
        "status": run.status,
        # Keys logged so far by a run trained elsewhere (any names): run.js reloads when there are more. A
        # native run's keys are the trainer's, each charted from the start.
        "key_count": len(run.latest_metrics or {}) if run.experiment.imported else None,
        "charts": [chart for section in sections for chart in section["charts"]],
        "clock_key": run.clock_key,  # the training-time axis sums it
        "cursor": cursor,  # ?step=: every chart's cursor and the trajectories link open at this step
        "collapse_every": _collapse_every(run.config),  # why the Template collapse panel may be empty
        # An MLflow run takes points after it ended and may run again: its page keeps asking once ended.
        "mlflow": run.host == MLFLOW_HOST,
        "urls": {
            "metrics": reverse("api_run_metrics", args=[run.pk]),
            "events": reverse("api_run_events", args=[run.pk]),
            "detector_inputs": reverse("api_run_detector_inputs", args=[run.pk]),
            "trajectories": reverse("run_trajectories", args=[run.pk]),
            "reward_std_hist": reverse("api_run_reward_std_hist", args=[run.pk]),
        },
    }
    return render(
        request,
        template,
        {
            "run": run,
            "too_short": run.too_short_for_a_collapse(),
            "first_collapse": run.events.filter(level="collapse").order_by("step").first(),
            "experiment": run.experiment,
            "config_yaml": yaml.safe_dump(run.config, sort_keys=False, allow_unicode=True),
            # The "judge with other settings" box starts from the experiment's own.
            "detector_overrides_yaml": yaml.safe_dump(
                run.experiment.detector_overrides, sort_keys=False, allow_unicode=True
            )
            if run.experiment.detector_overrides
            else "",
            "step_error": step_error,
            "view_notices": chart_view.view_notices(request.GET, run_page=True),
            "mlflow_run": mlflow_run,  # an MLflow client's run: its tags, parent and artifacts
            "artifacts": Artifact(mlflow_run, "").files(ARTIFACTS_SHOWN) if mlflow_run else None,
            "artifacts_shown": ARTIFACTS_SHOWN,
            "lost_after": settings.MLFLOW_LOST_AFTER,
            "heartbeat_timeout": settings.RUN_HEARTBEAT_TIMEOUT,
            "sections": sections,
            "page": page,  # read by static/js/run.js through json_script
            **_alert_emails(run),
        },
    )


def _alert_emails(run) -> dict:
    """The run's alert emails, as the page and its live part (?part=alerts) show them."""
    notifications = list(
        Notification.objects.filter(run=run).select_related("event").prefetch_related("also").order_by("id")
    )
    on_the_way = (Notification.Status.PENDING, Notification.Status.SENDING)
    return {
        "notifications": notifications,
        "alerted_nobody": not notifications and Notification.alerted_nobody(run),
        # Deleting the run drops them (their events go with it): its Delete confirmation says so.
        "unsent_emails": sum(n.status == Notification.Status.PENDING for n in notifications),
        # The part refreshes while more may come or one is still on its way.
        "alerts_live": not run.is_finished or any(n.status in on_the_way for n in notifications),
    }


def as_sentence(error: Exception) -> str:
    """A model's refusal ("run 3 is queued: ...") as a message on a page: capitalised, with a full stop."""
    text = str(error)
    return f"{text[:1].upper()}{text[1:]}."


@login_required
@require_POST
def run_stop(request, pk):
    run = owned_run(request, pk)
    try:
        run.request_stop()
    except Run.TrainedElsewhere as error:
        messages.error(request, as_sentence(error))
        return redirect(run)
    if run.status == Run.Status.STOPPED:
        messages.success(request, "Stopped: the run was still queued and will not start.")
    elif run.stop_requested and not run.is_finished:
        messages.success(
            request, "Stop requested: the run checkpoints at its next step boundary, then stops."
        )
    else:
        messages.info(request, f"The run had already ended ({run.get_status_display().lower()}).")
    return redirect(run)


@login_required
@require_POST
def run_resume(request, pk):
    run = owned_run(request, pk)
    try:
        run.resume()
    except (Run.TrainedElsewhere, Run.NotResumable) as error:
        messages.error(request, as_sentence(error))
        return redirect(run)
    messages.success(request, f"Resumed: queued again; {run.resumes_from}.")
    return redirect(run)


@login_required
@require_safe
def run_trajectories(request, pk):
    run = owned_run(request, pk)
    steps = list(Sample.objects.filter(run=run).order_by("step").values_list("step", flat=True).distinct())
    asked, step_error = _step_param(request, "the last sampled step")
    step = nearest_sampled(steps, asked) if asked is not None else (steps[-1] if steps else None)
    samples = Sample.objects.filter(run=run, step=step).order_by("index") if step is not None else []
    filters = TrajectoryFilterForm(request.GET)
    trajectories = [trajectory(sample.index, sample.data) for sample in samples]
    for shown in trajectories:
        shown["kept"] = filters.keeps(shown)
    return render(
        request,
        "runs/trajectories.html",
        {
            "run": run,
            "steps": steps,
            "step": step,
            "step_position": steps.index(step) if step in steps else 0,
            "asked_step": asked,
            "legend": board_legend(run.config),
            "success_means": success_means(run.config),
            "max_actions_per_turn": get_dotted(run.config, "rollout.max_actions_per_turn"),
            "step_error": step_error,
            "trajectories": trajectories,
            "kept_count": sum(shown["kept"] for shown in trajectories),
            "filters": filters,
        },
    )
