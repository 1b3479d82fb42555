import functools
import smtplib

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import HttpResponse, HttpResponseBadRequest
from django.shortcuts import get_object_or_404, redirect, render
from django.template.defaultfilters import pluralize
from django.utils.text import slugify
from django.views.decorators.http import require_http_methods, require_POST, require_safe

import envs
from trainer.config import PRESETS, TrainConfig
from webapp.alerts import emails
from webapp.core.json_response import JsonResponse
from webapp.core.live_parts import page_or_part
from webapp.experiments import estimate, form_inputs, overview
from webapp.experiments.forms import AlertsForm, ExperimentForm, ExperimentListForm, ImportConfigForm
from webapp.experiments.models import Experiment, Run
from webapp.runs import queue
from webapp.runs.owned import owned_run

PAGE_SIZE = 20


@login_required
@require_safe
def experiment_list(request):
    template = page_or_part(request, "experiments/list.html", experiments="experiments/_list_table.html")
    if isinstance(template, HttpResponseBadRequest):
        return template
    form = ExperimentListForm(request.GET)
    context = {"form": form, "env_names": list(envs.registry()), "statuses": Run.Status.values}
    if not form.is_valid():
        return render(request, "experiments/list.html", context, status=400)
    experiments = form.ordered(form.apply(overview.annotated(Experiment.objects.for_user(request.user))))
    page = Paginator(experiments, PAGE_SIZE).get_page(form.cleaned_data["page"])
    overview.attach_sparklines(page.object_list)
    return render(
        request,
        template,
        {
            **context,
            "page": page,
            "live": any(experiment.runs_running or experiment.runs_queued for experiment in page.object_list),
            "query_without_page": form.query_string(),
            "filtered": form.filtered,
            "headers": form.headers(),
        },
    )


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def experiment_new(request):
    if request.method == "POST":
        form = ExperimentForm(request.POST)
        if form.is_valid():
            experiment = Experiment.create_with_runs(request.user, form.spec, form.planned)
            messages.success(
                request,
                f"Created {len(form.planned)} run{pluralize(len(form.planned))}; each waits for {queue.waits_for()}.",
            )
            return redirect(experiment)
        return _render_new(request, form, ImportConfigForm(), status=400)
    return _render_new(request, ExperimentForm(), ImportConfigForm())


@login_required
@require_POST
def experiment_estimate(request):
    """The new-experiment form, as it stands, checked: how many runs and how long each should take here
    (static/js/experiment_form.js asks as the form changes; estimate.answer)."""
    data = request.POST.copy()
    data["name"] = data.get("name", "").strip() or "estimate"  # the name changes nothing here
    form = ExperimentForm(data)
    form.is_valid()
    detector_overrides = form.spec.detector_overrides if form.spec else {}
    return JsonResponse(estimate.answer(form, form.planned, detector_overrides, request.user))


@login_required
@require_safe
def experiment_rerun(request, pk):
    """ "Re-run with changes": the new-experiment form, prefilled from this experiment."""
    source = get_object_or_404(Experiment.objects.for_user(request.user), pk=pk)
    if not source.config:
        return _no_trainer_config(request, source, "re-run")
    return _render_new(
        request, ExperimentForm(initial=ExperimentForm.initial_from_experiment(source)), ImportConfigForm()
    )


def _no_trainer_config(request, experiment, what: str):
    """Its page, saying why (a 404 said a page that exists was not found)."""
    messages.error(
        request, f"Experiment {experiment.pk} was trained elsewhere: it has no trainer config to {what}."
    )
    return redirect(experiment)


@login_required
@require_safe
def run_rerun(request, pk):
    """A run's "Re-run": the new-experiment form with this run's config and seed, without the grid."""
    run = owned_run(request, pk)
    if not run.experiment.config or run.experiment.imported:
        return _no_trainer_config(request, run.experiment, "re-run")
    initial = ExperimentForm.initial_from_experiment(run.experiment, run=run)
    return _render_new(request, ExperimentForm(initial=initial), ImportConfigForm())


@login_required
@require_POST
def experiment_import(request):
    # Sent with the experiment form's fields (templates/experiments/new.html): kept, imported or not.
    typed = ExperimentForm.typed_initial(request.POST)
    import_form = ImportConfigForm(request.POST, request.FILES, typed=typed)
    if import_form.is_valid():
        form = ExperimentForm(initial=import_form.cleaned_data["initial"])
        messages.info(request, "Config imported: check the fields, then create the experiment.")
        return _render_new(request, form, ImportConfigForm())
    return _render_new(request, ExperimentForm(initial=typed), import_form, status=400)


@functools.cache
def _preset_values() -> dict[str, str]:
    """Each preset on each environment as YAML (an environment brings its own episode shape: turns,
    actions), keyed "<preset> <env>": the same for every request, so built once per process."""
    return {
        f"{name} {env}": TrainConfig.preset(name, env={"name": env}).to_yaml()
        for name in PRESETS
        for env in envs.registry()
    }


def _render_new(request, form, import_form, status=200):
    return render(
        request,
        "experiments/new.html",
        {"form": form, "import_form": import_form, "preset_yaml": _preset_values()},
        status=status,
    )


@login_required
@require_safe
def experiment_detail(request, pk):
    experiment = get_object_or_404(Experiment.objects.for_user(request.user), pk=pk)
    initial = {
        "alert_recipients": experiment.alert_recipients,
        "alert_on_warnings": experiment.alert_on_warnings,
    }
    return _render_detail(request, experiment, AlertsForm(initial=initial))


@login_required
@require_http_methods(["GET", "HEAD", "POST"])
def experiment_alerts(request, pk):
    experiment = get_object_or_404(Experiment.objects.for_user(request.user), pk=pk)
    if request.method != "POST":  # the address a refused save was shown at, opened again: the settings
        return redirect(_alert_settings(experiment))
    form = AlertsForm(request.POST)
    if not form.is_valid():
        return _render_detail(request, experiment, form, status=400)
    try:
        experiment.set_alerts(form.cleaned_data["alert_recipients"], form.cleaned_data["alert_on_warnings"])
    except Experiment.NotAlerted as error:
        messages.error(request, f"{str(error)[:1].upper()}{str(error)[1:]}.")
        return redirect(experiment)
    messages.success(request, "Alert settings saved.")
    return redirect(experiment)


def _alert_settings(experiment) -> str:
    """The experiment page opened at its alert settings (nav.js unfolds the section an address names)."""
    return experiment.get_absolute_url() + "#alert-settings"


@login_required
@require_POST
def experiment_alert_test(request, pk):
    """Send a test alert email to the saved recipients now, and say whether the mail server took it."""
    experiment = get_object_or_404(Experiment.objects.for_user(request.user), pk=pk)
    recipients = experiment.recipients()
    if experiment.from_file:
        messages.error(request, "No test email: runs imported from a file are never alerted on.")
    elif not recipients:
        messages.error(
            request,
            "No test email: this experiment's alerts go to nobody "
            "(no recipients are saved and your account has no email).",
        )
    else:
        try:
            experiment.claim_test_email()
            emails.send_test(experiment, request.user)
        except Experiment.TestEmailTooSoon as wait:
            messages.error(
                request,
                "No test email: one went out less than a minute ago (one a minute at most); "
                f"try again in {wait.wait_seconds} s.",
            )
        except (smtplib.SMTPException, OSError) as error:  # refused, unreachable, timed out
            messages.error(
                request,
                f"The test email to {', '.join(recipients)} was not sent {emails.destination()}: "
                f"{type(error).__name__}: {error}",
            )
        else:
            messages.success(
                request,
                f"Sent a test alert email to {', '.join(recipients)}: it went {emails.destination()}.",
            )
    return redirect(_alert_settings(experiment))


def _render_detail(request, experiment, alerts_form, status=200):
    # Archived runs stay out of sight, as on the runs table, unless asked for (?archived=include).
    archived_choice = request.GET.get("archived", "")
    if archived_choice not in ("", "include"):
        return HttpResponseBadRequest(
            f"archived: {archived_choice[:40]!r} is not a choice (include)",
            content_type="text/plain; charset=utf-8",
        )
    include_archived = archived_choice == "include"
    template = page_or_part(request, "experiments/detail.html", runs="experiments/_runs.html")
    if isinstance(template, HttpResponseBadRequest):
        return template
    shown = experiment.runs.all() if include_archived else experiment.runs.active()
    runs = overview.annotated_runs(shown)
    overview.attach_run_sparklines(runs)
    return render(
        request,
        template,
        {
            "experiment": experiment,
            "runs": runs,
            "include_archived": include_archived,
            "archived_count": experiment.runs.archived().count(),
            "counts": experiment.status_counts(shown),
            "config_yaml": form_inputs.dump_yaml(experiment.config),
            "detector_overrides_yaml": form_inputs.dump_yaml(experiment.detector_overrides),
            "alerts_form": alerts_form,
            "delete_refusal": experiment.delete_refusal,
        },
        status=status,
    )


@login_required
@require_POST
def experiment_stop(request, pk):
    experiment = get_object_or_404(Experiment.objects.for_user(request.user), pk=pk)
    if experiment.imported:
        messages.error(request, "This experiment's runs are trained elsewhere: EchoLab cannot stop them.")
        return redirect(experiment)
    unfinished = list(experiment.runs.exclude(status__in=Run.FINISHED))
    for run in unfinished:
        run.request_stop()
    messages.success(request, stop_message(unfinished))
    return redirect(experiment)


def stop_message(runs: list[Run]) -> str:
    """What Stop all did: queued runs stop at once, running ones at their next step."""
    stopped = sum(run.status == Run.Status.STOPPED for run in runs)
    asked = sum(run.status == Run.Status.RUNNING for run in runs)
    parts = [f"Stopped {stopped} queued run{pluralize(stopped)}"] if stopped else []
    if asked:
        parts.append(
            f"asked {asked} running run{pluralize(asked)} to stop at {'its' if asked == 1 else 'their'} next step"
        )
    return ("; ".join(parts) or "No run was left to stop") + "."


@login_required
@require_POST
def experiment_resume(request, pk):
    experiment = get_object_or_404(Experiment.objects.for_user(request.user), pk=pk)
    if experiment.imported:
        messages.error(request, "This experiment's runs are trained elsewhere: EchoLab cannot resume them.")
        return redirect(experiment)
    resumed = from_scratch = 0
    for run in experiment.runs.active().filter(status=Run.Status.STOPPED):
        run.experiment = experiment
        try:
            run.resume()
            resumed += 1
            from_scratch += not run.resumable_checkpoint
        except Run.NotResumable:  # resumed (or deleted) meanwhile, from another tab or the API
            pass
    if not from_scratch:
        where = "each continues from its last checkpoint"
    elif from_scratch == resumed:
        where = "without a checkpoint, each starts from step 0"
    else:
        kept = resumed - from_scratch
        where = (
            f"{kept} {'continues from its' if kept == 1 else 'continue from their'} last checkpoint, "
            f"{from_scratch} without one from step 0"
        )
    messages.success(request, f"Resumed {resumed} stopped run{pluralize(resumed)}: {where}.")
    return redirect(experiment)


@login_required
@require_POST
def experiment_delete(request, pk):
    experiment = get_object_or_404(Experiment.objects.for_user(request.user), pk=pk)
    try:
        deleted = experiment.delete_with_runs()
    except Run.StillTraining as refusal:
        messages.error(request, f"Not deleted: {refusal}.")
        return redirect(experiment)
    messages.success(request, f"Deleted {experiment.name} and its {deleted} run{pluralize(deleted)}.")
    return redirect("experiment_list")


@login_required
@require_safe
def experiment_export(request, pk):
    experiment = get_object_or_404(Experiment.objects.for_user(request.user), pk=pk)
    if not experiment.config:
        return _no_trainer_config(request, experiment, "export")
    exported = experiment.export_body()
    header = (
        f"# EchoLab experiment {experiment.pk}, with the fields POST /api/experiments takes (as JSON there).\n"
        "# Import it on the new-experiment page to create its runs again: seeds, grid and settings.\n"
    )
    if "config" in exported:
        header += (
            "# `config` is the first run's complete trainer config (python -m trainer train --config reads\n"
            "# that part).\n"
        )
    else:
        header += "# `preset`, `env`, `model`, `steps` and `overrides` make each run's trainer config.\n"
    body = yaml.safe_dump(exported, sort_keys=False, allow_unicode=True)
    response = HttpResponse(header + body, content_type="application/x-yaml")
    filename = slugify(experiment.name) or f"experiment-{experiment.pk}"
    response["Content-Disposition"] = f'attachment; filename="{filename}.yaml"'
    return response
