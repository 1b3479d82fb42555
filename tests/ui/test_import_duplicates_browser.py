"""/import in chromium: a reward-only run's collapse is called a collapse of its mean reward (it has no
success rate), and importing the same file again imports it with a warning naming the earlier run."""

import pytest

from diagnostics import load_series
from tests.helpers import REPO_ROOT
from webapp.experiments.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"
SOURCE = REPO_ROOT / "tests" / "data" / "detector" / "frozenlake-ppo-s0.csv"


def reward_only_csv(tmp_path):
    """The recorded FrozenLake run's mean reward alone: what a trainer that logs no success writes."""
    path = tmp_path / "reward-only.csv"
    rows = [f"{step},{values['train/reward_mean']}" for step, values in load_series(str(SOURCE))]
    path.write_text("step,train/reward_mean\n" + "\n".join(rows) + "\n")
    return path


def import_file(page, path):
    page.goto(f"{page.base}/import")
    page.set_input_files("#import-form input[type=file]", str(path))
    page.click("#import-form button[type=submit]")
    page.wait_for_url("**/runs/*/")


def test_reward_only_collapse_is_worded_for_the_reward_and_a_reimport_warns(page, tmp_path):
    path = reward_only_csv(tmp_path)
    import_file(page, path)
    first = Run.objects.get()
    events = page.locator("#event-list")
    events.wait_for()
    text = events.inner_text()
    assert "Mean reward collapsed: smoothed train/reward_mean" in text
    assert "Success collapsed" not in page.locator("body").inner_text()
    assert not page.locator(".message-warning").count()  # a first import is no duplicate

    import_file(page, path)
    second = Run.objects.exclude(pk=first.pk).get()
    assert page.url.endswith(second.get_absolute_url())
    warning = page.locator(".message-warning")
    assert "This file has the same content as an earlier import" in warning.inner_text()
    page.screenshot(path=str(ARTIFACTS / "import-duplicate-warning.png"), full_page=False)
    warning.get_by_role("link", name=first.display_name).click()
    page.wait_for_url(f"**{first.get_absolute_url()}")

    # Other bytes (one more step) are not the same file: no warning.
    path.write_text(path.read_text() + "1000,0.5\n")
    import_file(page, path)
    assert not page.locator(".message-warning").count()
