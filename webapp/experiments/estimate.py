"""Before an experiment is created: how long each planned run should take on this server. The basis is the
step times (time/step_s) that the user's runs trained here measured (measured_runs), of the same model
(and environment, and then algorithm, when there are such runs: a critic's update, or StarPO-S's filter
keeping a quarter of the groups, changes a step's time as much as the rollout does). A step's time grows
with how many tokens it may generate, the rollout size, but not in proportion: a step also has a fixed
cost (the update, validation, the logging), which dominates a small rollout. So runs of the same rollout
size are taken as they are; else, with runs of two or more sizes, step time is fitted as a fixed cost
plus a cost per token of rollout size; with one size only (or a fit with a negative cost, from noisy step
times), scaled in proportion (an upper bound when scaling up). Imported runs are left out: their step
times are another machine's; so is each run's step 0. With several runs the line adds their time in all
on one worker: each waits for a free one."""

import statistics
from dataclasses import dataclass

from django.db.models import Avg, Count

from diagnostics.detector import fewest_steps_for_a_collapse
from diagnostics.metrics import TIME_STEP_S
from webapp.core.templatetags.echolab import duration
from webapp.core.wording import shortlist
from webapp.experiments import spec_parsing
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint
from webapp.runs import queue

MEASURED_RUNS = 200  # the most recent runs with step times that an estimate looks at
# Finite and sane: Postgres sorts NaN above every number, so an upper bound also leaves NaN out.
MAX_STEP_SECONDS = 1e7


def rollout_size(config: dict) -> int:
    """The most tokens one training step may generate: env_groups x group_size x max_turns x max_new_tokens."""
    rollout = config.get("rollout") or {}
    size = 1
    for name in ("env_groups", "group_size", "max_turns", "max_new_tokens"):
        value = rollout.get(name)
        size *= value if isinstance(value, int) and value > 0 else 1
    return size


def algorithm(config: dict) -> str:
    """What of a run's algorithm moves its step time: the advantage estimator (PPO trains a critic too) and
    the rollout filter (StarPO-S updates on the groups it keeps), e.g. "ppo, filter top_ratio 0.25"."""
    settings = config.get("algorithm") or {}
    advantage, kept = settings.get("advantage", "ppo"), settings.get("filter", "none")
    ratio = settings.get("filter_ratio") if kept == "top_ratio" else None
    return f"{advantage}, filter {kept}" + (f" {ratio:g}" if isinstance(ratio, (int, float)) else "")


@dataclass
class Measured:
    model: str
    env: str
    algorithm: str
    seconds_per_step: float
    size: int


def measured_runs(user) -> list[Measured]:
    """The mean step time of each of the latest MEASURED_RUNS runs of the user's trained here that logged
    time/step_s (another user's would tell which models others train, and how fast), its step 0 left out:
    the first validation and the warm-up make it several times a later step (a tester's estimate from a
    demo run stopped after that step said 10.5 s a step, for runs of 2-6 s)."""
    means = (
        MetricPoint.objects.filter(
            key=TIME_STEP_S,
            step__gt=0,
            value__gt=0,
            value__lt=MAX_STEP_SECONDS,
            run__experiment__imported=False,
            run__in=Run.objects.for_user(user),
        )
        .values("run_id")
        .annotate(mean=Avg("value"), n=Count("id"))
        .order_by("-run_id")[:MEASURED_RUNS]
    )
    mean_of = {row["run_id"]: row["mean"] for row in means}
    configs = Run.objects.filter(pk__in=mean_of).values_list("pk", "config")
    return [
        Measured(
            model=str((config.get("model") or {}).get("name", "")),
            env=str((config.get("env") or {}).get("name", "")),
            algorithm=algorithm(config),
            seconds_per_step=mean_of[pk],
            size=rollout_size(config),
        )
        for pk, config in configs
    ]


@dataclass
class RunEstimate:
    label: str
    seconds: float | None  # None: nothing similar measured here
    basis: str
    model: str


def estimate_run(label: str, config: dict, measured: list[Measured]) -> RunEstimate:
    model = str((config.get("model") or {}).get("name", ""))
    env = str((config.get("env") or {}).get("name", ""))
    kind = algorithm(config)
    same_model = [m for m in measured if m.model == model]
    same_env = [m for m in same_model if m.env == env]
    same_algorithm = [m for m in same_env if m.algorithm == kind]
    similar, where = next(
        (
            (runs, where)
            for runs, where in (
                (same_algorithm, f"model {model} on {env} ({kind})"),
                (same_env, f"model {model} on {env} (other algorithms: none with {kind} yet)"),
                (same_model, f"model {model} (other environments: none on {env} yet)"),
            )
            if runs
        ),
        ([], ""),
    )
    if not similar:
        return RunEstimate(
            label,
            None,
            f"none of your runs of model {model} has measured its step time on this server yet",
            model,
        )
    per_step, how, used = step_seconds(similar, rollout_size(config))
    steps = (config.get("schedule") or {}).get("steps") or 0
    basis = (
        f"{seconds_text(per_step)} s a step, from {used} run{'s' if used != 1 else ''} of {where} measured "
        f"here, {how}"
    )
    return RunEstimate(label, per_step * steps, basis, model)


def seconds_text(seconds: float) -> str:
    """Three significant digits, a whole number from 100 on: "2.5", "41.3", "1,410" (not "1.41e+03")."""
    return f"{seconds:,.0f}" if seconds >= 100 else f"{seconds:.3g}"


def step_seconds(similar: list[Measured], size: int) -> tuple[float, str, int]:
    """The step time expected at rollout size `size` from runs `similar` to it, how it was found, and from
    how many runs (those of the same size when there are any, else all of them)."""
    same = [m.seconds_per_step for m in similar if m.size == size]
    if same:
        return statistics.median(same), "of the same rollout size", len(same)
    if len({m.size for m in similar}) >= 2:
        slope, fixed = statistics.linear_regression(
            [m.size for m in similar], [m.seconds_per_step for m in similar]
        )
        if slope > 0 and fixed >= 0:
            how = "fitted as a fixed cost plus a cost per token of rollout size"
            return fixed + slope * size, how, len(similar)
    # One size, or a fit that makes no sense (a negative fixed cost or per-token cost: noisy step times).
    # In proportion, the fixed cost scales too: from larger runs the estimate is low, from smaller ones high,
    # and the basis says which (a tester's FrozenLake run took 6x the estimate scaled down from larger ones).
    scaled = statistics.median(m.seconds_per_step * size / m.size for m in similar)
    if all(m.size > size for m in similar):
        return (
            scaled,
            "scaled down by rollout size from larger runs: likely longer (a step's fixed cost does not shrink)",
            len(similar),
        )
    if all(m.size < size for m in similar):
        return (
            scaled,
            "scaled up by rollout size from smaller runs: likely shorter (a step's fixed cost does not grow)",
            len(similar),
        )
    return scaled, "scaled by rollout size", len(similar)


def _models(names: list[str]) -> str:
    if len(names) == 1:
        return f"model {names[0]}"
    return "models " + ", ".join(names[:-1]) + f" or {names[-1]}"


MOST_BASES = 4
MOST_LABELS = 3


def _bases(runs: list[RunEstimate]) -> str:
    """What the estimates rest on: the one basis, or each (up to MOST_BASES) after the runs it serves."""
    labels: dict[str, list[str]] = {}
    for run in runs:
        labels.setdefault(run.basis, []).append(run.label)
    if len(labels) == 1:
        return next(iter(labels))
    parts = [
        f"{shortlist(names, MOST_LABELS)}: {basis}" for basis, names in list(labels.items())[:MOST_BASES]
    ]
    others = len(labels) - MOST_BASES
    rest = f"; {others} other {'basis' if others == 1 else 'bases'} for the other runs" if others > 0 else ""
    return "; ".join(parts) + rest


def answer(form, planned, detector_overrides: dict, user) -> dict:
    """What a form's estimate request answers (static/js/experiment_form.js): the form's errors while it is
    invalid (a 200 still: the question was fine, and a 400 on every keystroke fills the browser's
    console), else the summary and what each run waits for."""
    if form.errors:
        return {"errors": {field: " ".join(problems) for field, problems in form.errors.items()}}
    answered = summary(planned, user)
    answered["text"] += too_short_note(planned, detector_overrides) + download_note(planned) + queue_note()
    return {**answered, "waits_for": queue.waits_for()}


def queue_note() -> str:
    """The runs queued now, anyone's, or "": they start before the planned ones (the queue is first come,
    first served), so the estimate's time starts after theirs."""
    ahead = Run.objects.in_queue_order().count()
    if not ahead:
        return ""
    return f" {ahead:,} run{'s' if ahead != 1 else ''} already queued start{'s' if ahead == 1 else ''} before these."


def download_note(planned) -> str:
    """A word on hub models this server has not downloaded, or "": a worker fetches one when its run starts,
    and with the hub out of its reach the run fails then, after its wait in the queue (a tester's did, 14
    minutes later)."""
    missing = sorted(
        {
            name
            for run in planned
            for name in (run.config["model"]["name"], run.config["model"].get("warm_start"))
            if name and spec_parsing.is_hub_id(name) and not spec_parsing.in_hub_cache(name)
        }
    )
    if not missing:
        return ""
    names = ", ".join(missing)
    return (
        f" {names} {'is' if len(missing) == 1 else 'are'} not in this server's Hugging Face cache: a worker "
        "downloads it when its run starts, which needs the hub within that worker's reach (else the run fails "
        "then)."
    )


def too_short_note(planned, detector_overrides: dict) -> str:
    """A warning for runs too short for the detector to call a collapse (their finished pages say so too,
    Run.too_short_for_a_collapse), or ""."""
    needs = fewest_steps_for_a_collapse(detector_overrides)  # the form checked the overrides
    if needs is None:  # the collapse rule is off
        return ""
    short = sorted(
        {run.config["schedule"]["steps"] for run in planned if run.config["schedule"]["steps"] < needs}
    )
    if not short:
        return ""
    lengths = ", ".join(str(steps) for steps in short)
    return (
        f" Runs of {lengths} step{'s' if short != [1] else ''} are too short for the detector to call a "
        f"collapse: it needs at least {needs} logged steps (warnings still count)."
    )


def summary(planned, user) -> dict:
    """What the form shows: how many runs, the estimate of each (from the user's runs), and one line saying it."""
    measured = measured_runs(user)
    runs = [estimate_run(run.label, run.config, measured) for run in planned]
    known = [run.seconds for run in runs if run.seconds is not None]
    count = f"{len(runs)} run{'s' if len(runs) != 1 else ''}"
    unmeasured = list(dict.fromkeys(run.model for run in runs if run.seconds is None))
    # A grid over models: each model's runs have their own basis, and the line names every model unmeasured.
    no_estimate = (
        unmeasured
        and f"none of your runs of {_models(unmeasured)} has measured its step time on this server yet"
    )
    basis = _bases([run for run in runs if run.seconds is not None])
    if not known:
        text = f"{count}; no time estimate: {no_estimate}." if runs else "No runs planned."
    else:
        low, high = duration(min(known)), duration(max(known))
        unknown = len(runs) - len(known)
        # Runs wait for a free worker: in all, one after another on one worker, as many take their turns
        in_all = f"; {duration(sum(known))} in all on one worker" if len(known) > 1 else ""
        text = (
            f"{count}, about {low if low == high else f'{low} to {high}'} each ({basis}){in_all}"
            + (f"; {unknown} with no estimate: {no_estimate}" if unknown else "")
            + "."
        )
    return {
        "runs": [{"label": run.label, "seconds": run.seconds, "basis": run.basis} for run in runs],
        "total_seconds": sum(known) if known else None,
        "text": text,
    }
