"""The new-experiment form says, before it is submitted, how many runs it makes and how long each should
take on this server: from the step times runs trained here measured (here one run of another rollout size,
scaled in proportion); or that
there is no estimate yet."""

import re

import pytest

from tests.helpers import REPO_ROOT
from webapp.experiments.models import Experiment
from webapp.experiments.specs import ExperimentSpec
from webapp.metrics.models import MetricPoint

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"
STEP_SECONDS = 3.0


def tokens_per_step(config):
    rollout = config["rollout"]
    return rollout["env_groups"] * rollout["group_size"] * rollout["max_turns"] * rollout["max_new_tokens"]


def minutes_and_seconds(seconds):
    minutes, secs = divmod(round(seconds), 60)
    return f"{minutes}m {secs:02d}s"


def fill_form(page, steps, seeds):
    page.get_by_label("Name:", exact=True).fill("estimate me")
    page.get_by_label("Environment:", exact=True).select_option("frozenlake")
    page.get_by_label("Steps:", exact=True).fill(str(steps))
    page.get_by_label("Seeds:", exact=True).fill(seeds)


def test_the_form_states_runs_and_time_each_before_submit(page):
    console_errors = []
    page.on("console", lambda message: message.type == "error" and console_errors.append(message.text))
    page.goto(f"{page.base}/experiments/new/")
    estimate = page.locator("#run-estimate")
    fill_form(page, 20, "1, 2, 3")
    page.get_by_text("3 runs; no time estimate").wait_for()
    assert (
        "3 runs; no time estimate: none of your runs of model tiny has measured its step time on this server yet"
        in (estimate.inner_text())
    )

    # Half-typed, the form is invalid: the box says which field, and the browser logs no failed request.
    page.get_by_label("Steps:", exact=True).fill("-3")
    page.get_by_text("No estimate until the form is valid (Steps:").wait_for()  # as the form labels it
    assert console_errors == []
    # Submitted so, the form comes back refused with the box saying why still (not hidden).
    with page.expect_navigation():
        page.get_by_role("button", name="Create experiment").click()
    page.get_by_text("No estimate until the form is valid (Steps:").wait_for()
    assert not Experiment.objects.filter(name="estimate me").exists()
    page.get_by_label("Steps:", exact=True).fill("20")
    page.locator("input[name=env__frozenlake__size]").fill("99")
    page.get_by_text("No estimate until the form is valid (frozenlake Map size:").wait_for()
    page.locator("input[name=env__frozenlake__size]").fill("4")

    # A run of the tiny model trained here, with a smaller rollout (4 groups instead of 8), 3 s a step.
    measured = Experiment.create_with_runs(
        page.user,
        ExperimentSpec(
            name="measured",
            env={"name": "frozenlake", "params": {"size": 4}},
            steps=5,
            overrides={"rollout": {"env_groups": 4}},
        ),
    ).runs.get()
    MetricPoint.upsert(measured.pk, [(step, "time/step_s", STEP_SECONDS) for step in range(5)])

    page.get_by_label("Steps:", exact=True).fill("30")
    page.get_by_text("3 runs, about").wait_for()
    text = estimate.inner_text()
    page.screenshot(path=str(ARTIFACTS / "new-experiment-estimate.png"), full_page=True)
    page.get_by_role("button", name="Create experiment").click()
    page.wait_for_url("**/experiments/*/")

    created = Experiment.objects.get(name="estimate me").runs.order_by("pk")
    assert created.count() == 3
    scale = tokens_per_step(created[0].config) / tokens_per_step(measured.config)
    assert scale == 2  # the form's default preset rolls out 8 groups
    per_run = STEP_SECONDS * scale * 30
    assert f"3 runs, about {minutes_and_seconds(per_run)} each" in text, text
    assert re.search(r"from 1 run of model tiny on frozenlake \(ppo, filter none\) measured here", text), text
    assert "Each waits for a free worker." in text


def test_the_ablation_form_states_its_runs_before_it_creates_them(page):
    page.goto(f"{page.base}/compare/ablations")
    # Nothing chosen yet: no "No estimate until the form is valid (ablation: required)" to greet the user.
    page.wait_for_timeout(1500)
    assert not page.locator("#run-estimate").is_visible()
    assert page.get_by_role("group", name="Ablation").is_visible()  # the radios' fieldset and legend
    page.get_by_label("Responses per prompt").check()
    estimate = page.locator("#run-estimate")
    estimate.wait_for(state="visible")
    page.wait_for_function("document.getElementById('run-estimate').textContent.startsWith('Estimate: ')")
    assert re.match(r"Estimate: \d+ runs", estimate.inner_text())
    page.screenshot(path=str(ARTIFACTS / "ablation-estimate.png"), full_page=True)
