"""Delete on a run's page asks first (what is lost), then deletes the run and shows its experiment without it."""

import pytest

from tests.factories import make_experiment, points, trained_run
from tests.helpers import REPO_ROOT, answer_next_dialog
from webapp.experiments.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"


def test_delete_asks_first_then_the_run_is_gone_from_its_experiment(page):
    experiment = make_experiment(page.user, "lr sweep")
    doomed, kept = (trained_run(experiment, f"seed={seed}", step=20, total_steps=20) for seed in (1, 2))
    points(doomed, "train/success", {step: step / 20 for step in range(20)})

    page.goto(f"{page.base}/runs/{doomed.pk}/")
    delete = page.get_by_role("button", name="Delete")
    delete.scroll_into_view_if_needed()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "run-delete-button.png"))

    questions = answer_next_dialog(page, accept=False)
    delete.click()
    assert questions == [
        "Delete seed=1 for good? Its metrics, samples, detector events and alert history are deleted; this "
        "cannot be undone."
    ]
    page.wait_for_timeout(500)
    assert Run.objects.filter(pk=doomed.pk).exists()  # dismissed: nothing sent

    answer_next_dialog(page, accept=True)
    with page.expect_navigation():
        delete.click()
    assert page.url == f"{page.base}/experiments/{experiment.pk}/"
    text = page.locator("body").inner_text()
    assert "Deleted seed=1 with its metrics, samples and detector events." in text
    runs_table = page.locator("table.runs").inner_text()
    assert "seed=2" in runs_table and "seed=1" not in runs_table
    assert list(Run.objects.values_list("pk", flat=True)) == [kept.pk]
