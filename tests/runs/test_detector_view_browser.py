"""The run page's "Detector's view": a toggle that draws, on each chart of a metric a rule judges, the series
that rule used, from the server's replay; the value an event quotes can be read off the chart's table."""

from pathlib import Path

import pytest

from diagnostics import load_series
from tests.drawn_charts import drawn
from tests.helpers import REPO_ROOT, wait_for
from webapp.imports.importer import create_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "runs"
DATA = Path(__file__).resolve().parents[1] / "data" / "detector"


def test_the_toggle_draws_each_rules_series_and_takes_it_away(page):
    series = load_series(DATA / "frozenlake-ppo-s2.csv")
    run = create_run(page.user, "FrozenLake PPO", "frozenlake-ppo-s2.csv", series)
    collapse = run.events.filter(rule="collapse", level="collapse").order_by("step").first()
    assert collapse is not None  # this labelled run collapses: the event whose value we read off the chart
    steps = len(series)
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_selector("#event-list tbody tr")
    wait_for(lambda: drawn(page, "success")["lines"], timeout=15, message="success drawn")
    before = {chart: drawn(page, chart) for chart in ("success", "entropy", "kl")}
    assert not any("detector:" in text for chart in before.values() for text in chart["legend"])

    page.get_by_label("Detector's view").check()
    wait_for(
        lambda: "detector: collapse (smoothing 0.6)" in drawn(page, "success")["legend"],
        timeout=15,
        message="the collapse rule's series in the success chart's legend",
    )
    success = drawn(page, "success")
    # One more line after the metric's own (the last trace is the event markers'), drawn with a vertex per
    # judged step but where three lie on a straight line (Plotly drops the middle one).
    *own, added, markers = success["lines"]
    assert [*own, markers] == before["success"]["lines"] and added > steps / 2
    entropy = drawn(page, "entropy")
    assert {"detector: entropy_erratic (smoothing 0)", "detector: entropy_rise (smoothing 0.6)"} <= set(
        entropy["legend"]
    )
    *own, erratic, rise, markers = entropy["lines"]
    assert [*own, markers] == before["entropy"]["lines"] and erratic > steps / 2 and rise > steps / 2
    assert drawn(page, "kl") == before["kl"]  # no rule judges the KL: nothing added
    assert "over " + str(steps) + " steps" in page.locator("#detector-view-state").inner_text()
    page.get_by_role("button", name=f"Show step {collapse.step} on every chart").first.click()
    page.screenshot(path=str(ARTIFACTS / "run-detector-view.png"), full_page=True)
    page.locator("#chart-success").screenshot(path=str(ARTIFACTS / "run-detector-view-success.png"))

    # The quoted value, read off the success chart as a table at the event's step.
    page.get_by_label("Show Success (train and validation) as a table").check()
    table = page.locator("#table-success table")
    headers = table.locator("thead th").all_inner_texts()
    column = headers.index("detector: collapse (smoothing 0.6)")
    row = table.locator("tbody tr").filter(
        has=page.get_by_role("rowheader", name=str(collapse.step), exact=True)
    )
    cells = row.first.locator("th, td").all_inner_texts()
    assert cells[0] == str(collapse.step)
    assert float(cells[column]) == pytest.approx(collapse.signals["value"], rel=1e-4)
    assert f"{collapse.signals['value']:.4g}" in collapse.message  # the message quotes that same number
    page.get_by_label("Show Success (train and validation) as a table").uncheck()

    # The view is in the address: a copied link opens with the rules' series drawn.
    shared = page.url
    assert "detector=1" in shared
    page.goto(f"{page.base}/")
    page.goto(shared)
    wait_for(
        lambda: "detector: collapse (smoothing 0.6)" in drawn(page, "success")["legend"],
        timeout=15,
        message="the detector's view restored from the address",
    )
    assert page.get_by_label("Detector's view").is_checked()

    page.get_by_label("Detector's view").uncheck()
    assert "detector=1" not in page.url
    wait_for(
        lambda: not any("detector:" in text for text in drawn(page, "success")["legend"]),
        timeout=15,
        message="the rule's series taken away",
    )
    assert drawn(page, "success")["lines"] == before["success"]["lines"]
    assert drawn(page, "entropy")["lines"] == before["entropy"]["lines"]
    assert page.locator("#detector-view-state").is_hidden()
