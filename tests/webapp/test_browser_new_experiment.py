"""A real browser (Debian chromium through Playwright) fills in the new-experiment form: a bad value
shows its message next to the field, the fixed form lands on the experiment page."""

import contextlib
import os

import pytest

from tests.conftest import CHROMIUM, CHROMIUM_ARGS
from tests.factories import make_user
from tests.helpers import REPO_ROOT
from webapp.experiments.models import Experiment

ARTIFACTS = REPO_ROOT / "test-artifacts" / "webapp"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(
        not os.path.exists(CHROMIUM), reason="needs Debian chromium: apt-get install -y chromium"
    ),
]


@contextlib.contextmanager
def chromium_page():
    # Playwright's sync API runs an event loop in this thread, where Django refuses ORM calls: the
    # test touches the database only before and after this block.
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 1000})
        page.set_default_timeout(20_000)
        try:
            yield page
        finally:
            browser.close()


@pytest.fixture
def forget_queued_messages():
    """The created runs are really enqueued; take the messages back so no later worker test gets them."""
    yield
    from worker.celery import app

    with app.connection_for_write() as connection:
        connection.default_channel.queue_purge("gpu")


def test_form_shows_error_then_creates_experiment(live_server, forget_queued_messages):
    make_user("carol")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with chromium_page() as page:
        drive_form(page, live_server.url)
    experiment = Experiment.objects.get()
    assert experiment.name == "Browser <b>sweep</b>" and experiment.runs.count() == 4


def drive_form(page, url):
    page.goto(url + "/")
    assert "/accounts/login/" in page.url
    page.fill("input[name=username]", "carol")
    page.fill("input[name=password]", "carol-password-1")
    page.click("button[type=submit]")
    page.wait_for_url(url + "/")

    page.click("text=New experiment")
    page.wait_for_selector("#experiment-form")
    page.fill("input[name=name]", "Browser <b>sweep</b>")
    page.select_option("select[name=env]", "frozenlake")
    # Only the chosen environment's parameters are shown.
    assert page.is_visible("fieldset[data-env=frozenlake]")
    assert not page.is_visible("fieldset[data-env=sokoban]")
    page.fill("input[name=env__frozenlake__size]", "99")
    page.select_option("select[name=preset]", "starpo-s")  # starpo keeps every group: no ratio to vary
    page.fill("input[name=seeds]", "1,2")
    page.fill("textarea[name=grid]", "algorithm.filter_ratio = 0.5, 1.0")
    page.screenshot(path=str(ARTIFACTS / "new-experiment-filled.png"), full_page=True)
    page.click("#create-experiment")

    error = page.wait_for_selector("#field-env__frozenlake__size .errorlist")
    assert "must be at most 12" in error.inner_text()
    assert page.is_visible("fieldset[data-env=frozenlake]")
    page.screenshot(path=str(ARTIFACTS / "new-experiment-error.png"), full_page=True)

    page.fill("input[name=env__frozenlake__size]", "4")
    page.click("#create-experiment")
    page.wait_for_url(url + "/experiments/*/")
    assert page.inner_text("h1") == "Browser <b>sweep</b>"
    assert page.locator("table.runs tbody tr").count() == 4
    page.screenshot(path=str(ARTIFACTS / "experiment-page.png"), full_page=True)

    page.click("text=Experiments")
    page.wait_for_selector("table.experiments")
    assert "4 queued" in page.inner_text("table.experiments")
    page.screenshot(path=str(ARTIFACTS / "experiment-list.png"), full_page=True)
