"""The run page's heat strip of train/reward_std_hist in a real browser: drawn from stored records, "No
data" without them."""

import pytest

from tests.factories import make_run, streamed_run
from tests.helpers import REPO_ROOT
from webapp.experiments.models import Run
from webapp.metrics.models import StepRecord

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_heat_strip_draws_the_groups_stds_per_step(page):
    run = make_run(page.user, status=Run.Status.COMPLETED)
    StepRecord.objects.bulk_create(  # 8 groups whose spread shrinks: the filter's input drying up
        StepRecord(
            run=run, step=step, key="train/reward_std_hist", values=[0.5 / (1 + step) * g for g in range(8)]
        )
        for step in range(12)
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.locator("#reward-std-hist-plot .hm").first.wait_for()
    assert "In-group reward std of every group" in page.locator("#reward-std-hist h2").text_content()
    assert page.locator("#reward-std-hist-plot .gtitle").text_content() == "In-group reward std per group"
    assert page.locator("#reward-std-hist-plot .heatmaplayer .hm").count() == 1
    assert not page.locator("#reward-std-hist-empty").is_visible()
    page.locator("#reward-std-hist").screenshot(
        path=str(REPO_ROOT / "test-artifacts" / "runs" / "run-std-hist.png")
    )


def test_heat_strip_says_no_data_without_records(page):
    run = make_run(page.user, status=Run.Status.COMPLETED)
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.locator("#reward-std-hist-empty").wait_for(state="visible")
    assert "No data" in page.locator("#reward-std-hist-empty").text_content()
    assert page.locator("#reward-std-hist-plot .heatmaplayer").count() == 0


def test_heat_strip_of_a_run_that_has_not_logged_yet_says_so(page):
    run = make_run(page.user, status=Run.Status.QUEUED)
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.locator("#reward-std-hist-empty").wait_for(state="visible")
    assert page.locator("#reward-std-hist-empty").text_content().startswith("No step logged yet")


def test_heat_strip_of_a_live_run_trained_elsewhere_does_not_promise_it_will_fill_in(page):
    """Another trainer's script may never log train/reward_std_hist (TRL, veRL do not)."""
    run = streamed_run(page.user)
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.locator("#reward-std-hist-empty").wait_for(state="visible")
    assert page.locator("#reward-std-hist-empty").text_content() == (
        "No per-group reward std logged so far (train/reward_std_hist): the strip fills in if this run's "
        "script logs it."
    )
