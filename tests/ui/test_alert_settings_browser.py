"""An experiment's page changes who gets its alert emails, in chromium: the settings open, a bad address is
named under its field with what was typed kept, and saved settings show in the page's summary line."""

import pytest

from tests.helpers import REPO_ROOT
from webapp.tracking.models import ExternalExperiment

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"


def test_alert_settings_are_changed_on_the_experiments_page(page):
    experiment = ExternalExperiment.create(page.user, "mlflow sweep").experiment  # logged live: it alerts
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    summary = page.locator("#experiment-summary")
    assert "trained elsewhere · alerts to" in summary.inner_text()
    assert not page.get_by_role("link", name="Export YAML").count()  # nothing to export: no trainer config

    page.get_by_text("Alert settings", exact=True).click()
    recipients = page.get_by_label("Alert recipients")
    recipients.fill("me@example.com, oops")
    page.get_by_role("button", name="Save alert settings").click()
    page.get_by_text("'oops' is not a valid email address").wait_for()
    assert page.get_by_label("Alert recipients").input_value() == "me@example.com, oops"

    page.get_by_label("Alert recipients").fill("me@example.com, team@example.com")
    page.get_by_label("Also alert on warnings").check()
    page.get_by_role("button", name="Save alert settings").click()
    page.get_by_text("Alert settings saved.").wait_for()
    page.screenshot(path=str(ARTIFACTS / "experiment-alert-settings.png"), full_page=False)
    assert (
        "alerts to me@example.com, team@example.com (warnings too)"
        in page.locator("#experiment-summary").inner_text()
    )
