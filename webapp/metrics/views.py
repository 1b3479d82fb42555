"""A run's pages: live charts and status, stop, and the sampled trajectories. Scoped to the owner."""

import json

import yaml
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.views.decorators.http import require_POST

import envs
from webapp.alerts.models import Notification
from webapp.experiments.models import Run
from webapp.metrics.ingest import MAX_STEP
from webapp.metrics.models import Sample
from webapp.runs.charts import chart_sections


def _owned_run(request, pk) -> Run:
    return get_object_or_404(Run.objects.for_user(request.user).select_related("experiment"), pk=pk)


def _rerun_url(run: Run) -> str:
    try:
        return reverse("experiment_rerun", args=[run.experiment_id])
    except NoReverseMatch:
        return f"/experiments/{run.experiment_id}/rerun"


def _step_param(request) -> tuple[int | None, str]:
    """?step=N as (N, "") or (None, a message naming the problem); absent is (None, "")."""
    text = request.GET.get("step", "").strip()
    if not text:
        return None, ""
    if not text.isdigit() or int(text) > MAX_STEP:
        return (
            None,
            f"step: expected a whole number from 0 to {MAX_STEP}, got {text[:20]!r}; showing the whole run",
        )
    return int(text), ""


@login_required
def run_detail(request, pk):
    run = _owned_run(request, pk)
    cursor, step_error = _step_param(request)
    sections = chart_sections(run)
    page = {
        "run": run.pk,
        "finished": run.is_finished,
        "charts": [chart for section in sections for chart in section["charts"]],
        "cursor": cursor,  # ?step=: every chart's cursor and the trajectories link open at this step
        "urls": {
            "metrics": reverse("api_run_metrics", args=[run.pk]),
            "events": reverse("api_run_events", args=[run.pk]),
            "trajectories": reverse("run_trajectories", args=[run.pk]),
        },
    }
    return render(
        request,
        "runs/detail.html",
        {
            "run": run,
            "experiment": run.experiment,
            "config_yaml": yaml.safe_dump(run.config, sort_keys=False, allow_unicode=True),
            "progress_percent": round(100 * run.step / run.total_steps) if run.total_steps else 0,
            "rerun_url": _rerun_url(run),
            "step_error": step_error,
            "sections": sections,
            "page": page,  # read by static/js/run.js through json_script
            "notifications": Notification.objects.filter(event__run=run)
            .select_related("event")
            .order_by("id"),
        },
    )


@login_required
@require_POST
def run_stop(request, pk):
    run = _owned_run(request, pk)
    run.request_stop()
    if run.status == Run.Status.STOPPED:
        messages.success(request, "Stopped: the run was still queued and will not start.")
    elif run.stop_requested and not run.is_finished:
        messages.success(
            request, "Stop requested: the run checkpoints at its next step boundary, then stops."
        )
    else:
        messages.info(request, f"The run had already ended ({run.get_status_display().lower()}).")
    return redirect(run)


def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def _text(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def trajectory(index: int, data) -> dict:
    """A sample as the template shows it, whatever shape the trainer (or a bug) gave it."""
    sample = _mapping(data)
    turns = sample.get("turns") if isinstance(sample.get("turns"), list) else []
    valid = [_mapping(turn).get("valid") for turn in turns]
    return {
        "index": index,
        "group": sample.get("group"),
        "seed": sample.get("seed"),
        "reward": sample.get("reward"),
        "success": sample.get("success"),
        "text": _text(sample.get("text")),
        "raw": "" if isinstance(data, dict) else _text(data),
        "format_valid": all(value is not False for value in valid) if turns else None,
        "turns": [
            {
                "state": _text(turn.get("state")),
                "think": _text(turn.get("think")),
                "answer": _text(turn.get("answer")),
                "actions": ", ".join(map(_text, turn["actions"]))
                if isinstance(turn.get("actions"), list)
                else _text(turn.get("actions")),
                "reward": turn.get("reward"),
                "valid": turn.get("valid"),
            }
            for turn in map(_mapping, turns)
        ],
    }


def nearest_sampled(steps: list[int], asked: int) -> int | None:
    """The sampled step a link to `asked` means: the last one at or before it, else the first after."""
    before = [step for step in steps if step <= asked]
    return before[-1] if before else (steps[0] if steps else None)


def board_legend(config: dict) -> dict[str, str]:
    """Symbol -> meaning of the run's environment board, as the environment itself describes it to the
    model; empty for a run whose config names no environment that builds (an imported run)."""
    env = _mapping(_mapping(config).get("env"))
    try:
        return dict(envs.make(env.get("name", ""), **_mapping(env.get("params"))).symbols)
    except Exception:  # an unknown name or stale params: the page still shows the samples
        return {}


@login_required
def run_trajectories(request, pk):
    run = _owned_run(request, pk)
    steps = list(Sample.objects.filter(run=run).order_by("step").values_list("step", flat=True).distinct())
    asked, step_error = _step_param(request)
    step = nearest_sampled(steps, asked) if asked is not None else (steps[-1] if steps else None)
    samples = Sample.objects.filter(run=run, step=step).order_by("index") if step is not None else []
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
            "step_error": step_error,
            "trajectories": [trajectory(sample.index, sample.data) for sample in samples],
        },
    )
