"""The run page's "Judge this run with other detector settings" in a real browser: the events of a replay
with the settings typed, beside those of a replay with the experiment's, nothing stored; settings the
detector refuses are named at the field."""

from pathlib import Path

import pytest

from diagnostics import load_series
from tests.helpers import REPO_ROOT
from webapp.imports.importer import create_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
DATA = Path(__file__).resolve().parents[1] / "data" / "detector"


def test_a_rule_turned_off_shows_which_events_it_would_have_spared(page):
    run = create_run(
        page.user, "FrozenLake PPO", "frozenlake-ppo-s2.csv", load_series(DATA / "frozenlake-ppo-s2.csv")
    )
    stored = run.events.count()
    reward_std = run.events.filter(rule="reward_std_drop").count()
    assert reward_std and stored > reward_std  # the file's events: some of this rule, some of others
    page.goto(f"{page.base}/runs/{run.pk}/#try-settings")  # as an alert email links to it: opened there
    assert (
        page.get_by_label("Detector overrides (YAML or JSON):").input_value() == ""
    )  # the experiment's: none

    page.get_by_label("Detector overrides (YAML or JSON):").fill("reward_std_drop: {enabled: false}")
    page.get_by_role("button", name="Judge this run").click()
    summary = page.locator("#try-summary")
    summary.get_by_text("With these settings:").wait_for()
    assert summary.inner_text().endswith(f"{reward_std} event{'s' if reward_std > 1 else ''} gone, 0 new.")
    rows = [row.split("\t") for row in page.locator("#try-events tbody tr").all_inner_texts()]
    assert len(rows) == stored
    assert {tuple(row[3:5]) for row in rows if row[2] == "reward_std_drop"} == {("yes", "no")}
    assert {tuple(row[3:5]) for row in rows if row[2] != "reward_std_drop"} == {("yes", "yes")}
    assert run.events.count() == stored  # nothing stored
    page.locator("#try-settings").screenshot(
        path=str(REPO_ROOT / "test-artifacts" / "runs" / "try-settings.png")
    )

    # A value the detector refuses: named at the field, which gets the focus; the table is not shown.
    page.get_by_label("Detector overrides (YAML or JSON):").fill("reward_std_drop: {ratio: 7}")
    page.get_by_role("button", name="Judge this run").click()
    error = page.locator("#try-overrides-error")
    error.wait_for()
    assert "reward_std_drop.ratio" in error.inner_text()
    field = page.get_by_label("Detector overrides (YAML or JSON):")
    assert field.get_attribute("aria-invalid") is not None
    assert field.evaluate("e => e === document.activeElement")
    assert not page.locator("#try-events").is_visible() and summary.inner_text() == ""
