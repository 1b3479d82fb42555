"""Experiment pages move while runs train, in chromium: statuses and progress update without a reload, the
compare ticks survive the refresh, and the page stops asking once every run has finished."""

import pytest

from tests.factories import spec_experiment
from tests.helpers import REPO_ROOT
from webapp.experiments.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"


def test_the_runs_table_follows_a_run_from_queued_to_completed(page):
    experiment = spec_experiment(page.user, seeds=[1, 2], steps=10)
    first, second = experiment.runs.order_by("id")
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    row = page.locator("table.runs tbody tr").first
    assert "Queued" in row.inner_text() and "0 / 10" in row.inner_text()
    page.locator(f"input.compare-select[value='{second.pk}']").check()

    Run.objects.filter(pk=first.pk).update(status="running", step=6, host="gpu-7")
    page.get_by_text("6 / 10").wait_for(timeout=15_000)
    assert "Running" in row.inner_text() and "gpu-7" in row.inner_text()
    assert sorted(page.locator(".badges .badge").all_inner_texts()) == ["1 queued", "1 running"]
    assert page.locator(f"input.compare-select[value='{second.pk}']").is_checked()  # the tick survived
    assert page.locator("#compare-count").inner_text() == "1 run selected"
    focused = "document.activeElement.matches('input.compare-select') && document.activeElement.value"
    assert page.evaluate(focused) == str(second.pk)  # and so did the keyboard focus
    page.screenshot(path=str(ARTIFACTS / "experiment-live-runs.png"))

    Run.objects.filter(pk__in=[first.pk, second.pk]).update(status="completed", step=10)
    page.locator(".badges").get_by_text("2 completed").wait_for(timeout=15_000)
    assert page.locator("#experiment-runs[data-live]").count() == 0  # nothing left to follow

    asked = []
    page.on("request", lambda request: "part=runs" in request.url and asked.append(request.url))
    page.wait_for_timeout(6_000)
    assert asked == []


def test_the_experiment_list_follows_progress(page):
    experiment = spec_experiment(page.user, seeds=[1], steps=10)
    page.goto(f"{page.base}/")
    row = page.locator("table.experiments tbody tr").first
    assert "1 queued" in row.inner_text()
    Run.objects.filter(experiment=experiment).update(status="running", step=5)
    row.get_by_text("1 running").wait_for(timeout=15_000)
    assert "50%" in row.inner_text()
