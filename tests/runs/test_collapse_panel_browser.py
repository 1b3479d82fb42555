"""The run page's "Template collapse" panel in a real browser: drawn from collapse/* metrics, "No data"
without them."""

import os

import pytest

from tests.factories import make_run
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_panel_draws_mi_retrieval_with_its_chance_line_and_the_regime_scatter(page):
    run = make_run(page.user, status=Run.Status.COMPLETED)
    points = []
    for i, step in enumerate(range(0, 40, 5)):  # measured every 5 steps; MI falls, retrieval to chance
        points += [
            (step, "collapse/mi_estimate", max(0.6 - 0.1 * i, 0.02)),
            (step, "collapse/retrieval_acc", max(0.9 - 0.1 * i, 0.25)),
            (step, "collapse/retrieval_chance", 0.25),
            (step, "collapse/conditional_entropy", 1.2 + 0.1 * i),
        ]
    # Reasoning gone at steps 40 and 45: no estimate there, only the valid thinking rate, at 0
    rates = [(step, "collapse/valid_thinking_rate", 1.0 if step < 40 else 0.0) for step in range(0, 50, 5)]
    MetricPoint.upsert(run.pk, points + rates + [(s, "train/success", 0.5) for s in range(50)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.locator("#collapse-mi .scatterlayer .trace").first.wait_for()
    assert page.locator("#collapse-panel h2").text_content() == "Template collapse"
    assert not page.locator("#collapse-no-data").is_visible()
    assert page.locator("#collapse-mi .scatterlayer .trace").count() == 4  # MI, retrieval, chance, rate
    assert page.locator("#collapse-mi .legendtext").all_text_contents() == [
        "MI estimate (nats)",
        "retrieval accuracy",
        "chance",
        "valid thinking rate",
    ]
    # the rate's line runs on to step 45, past the MI line's last measured step (35): one marker a step
    rate_markers = page.locator("#collapse-mi .scatterlayer .trace").nth(3).locator(".points path.point")
    assert rate_markers.count() == 10
    assert page.locator("#collapse-regime .scatterlayer .point").count() == 8  # one per measured step
    assert "step" in page.locator("#collapse-regime .colorbar").text_content()
    assert page.locator("#collapse-few-prompts").is_hidden()  # 4 prompts: enough to tell apart

    # Bandit: 2 prompts
    MetricPoint.upsert(run.pk, [(step, "collapse/retrieval_chance", 0.5) for step in range(0, 40, 5)])
    page.reload()
    page.get_by_text(
        "Few prompts to tell apart: the last measurement had 2 distinct prompts (retrieval's "
        "chance 50%), so the MI estimate is at most log 2 = 0.69 nats"
    ).wait_for()
    if os.environ.get("SCREENSHOTS"):
        shot = os.path.join(os.environ["SCREENSHOTS"], "collapse.png")
        page.locator("#collapse-panel").screenshot(path=shot)


@pytest.mark.parametrize(
    "config, status, logged, says",
    [
        (  # an imported TRL run
            {},
            Run.Status.COMPLETED,
            [],
            "No data: this run logs no collapse/* metrics (a run trained elsewhere, or a trainer without reasoning).",
        ),
        (
            {"collapse_every": 0},
            Run.Status.COMPLETED,
            [],
            "Off for this run: its diagnostics.collapse_every is 0.",
        ),
        (
            {"collapse_every": 5},
            Run.Status.RUNNING,
            [],
            "No step measured yet: the first measurement is at step 0, then every 5 steps.",
        ),
        (  # measured, but never two distinct prompts with reasoning: no estimate, and the page says why
            {"collapse_every": 5},
            Run.Status.COMPLETED,
            [(0, "collapse/valid_thinking_rate", 0.0), (5, "collapse/valid_thinking_rate", 0.125)],
            "No estimate: on every step measured so far (2, the last step 5), fewer than 2 distinct prompts "
            "came with reasoning inside <think> (valid thinking rate there: 0.125).",
        ),
    ],
)
def test_an_empty_panel_says_why(page, config, status, logged, says):
    config = {"diagnostics": config} if config else {}
    run = make_run(page.user, status=status, config=config)
    MetricPoint.upsert(run.pk, logged + [(s, "train/success", 0.5) for s in range(10)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.locator("#collapse-no-data").wait_for(state="visible")
    assert page.locator("#collapse-no-data").text_content() == says
    assert not page.locator("#collapse-charts").is_visible()
    assert page.locator("#collapse-panel .scatterlayer").count() == 0


def test_one_measured_step_colours_the_regime_scatter_by_whole_steps(page):
    # One measurement (step 0): the colour bar read -0.4 to 0.4 "step".
    run = make_run(page.user, status=Run.Status.COMPLETED)
    MetricPoint.upsert(
        run.pk,
        [
            (0, "collapse/mi_estimate", 0.4),
            (0, "collapse/retrieval_acc", 0.6),
            (0, "collapse/retrieval_chance", 0.25),
            (0, "collapse/conditional_entropy", 1.1),
            (0, "collapse/valid_thinking_rate", 1.0),
        ]
        + [(s, "train/success", 0.5) for s in range(8)],
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.locator("#collapse-regime .scatterlayer .point").first.wait_for()
    ticks = page.locator("#collapse-regime .colorbar .cbaxis text, #collapse-regime .colorbar .ytick text")
    labels = [label for label in ticks.all_text_contents() if label.strip()]
    assert labels and all(label.isdigit() for label in labels), labels
    assert len(set(labels)) == len(labels), labels  # whole steps, each once (not "0 0 0 1 1 1")


def test_a_run_logging_the_mi_estimate_alone_draws_it_named_and_says_the_scatter_has_no_data(page):
    # An imported run with only collapse/mi_estimate: no empty right axis, no empty scatter without a word.
    run = make_run(page.user, status=Run.Status.COMPLETED)
    MetricPoint.upsert(
        run.pk,
        [(step, "collapse/mi_estimate", 0.3 - 0.01 * step) for step in range(0, 30, 5)]
        + [(s, "train/success", 0.5) for s in range(30)],
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.locator("#collapse-mi .scatterlayer .trace").first.wait_for()
    assert page.locator("#collapse-mi .legendtext").all_text_contents() == ["MI estimate (nats)"]
    assert page.locator("#collapse-mi .y2title").count() == 0  # no right axis with nothing on it
    assert page.locator("#collapse-regime-no-data").inner_text() == (
        "Regime scatter: no data: this run logs no collapse/conditional_entropy at the steps of its MI estimate."
    )
    assert not page.locator("#collapse-regime").is_visible()
