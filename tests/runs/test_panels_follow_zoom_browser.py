"""The run page's panels drawn by their own scripts over steps (the collapse panel's MI chart, the
reward-std heat strip) join the page's x zoom and step cursor in real chromium: a zoom on a chart zooms
them, a zoom on them zooms the charts, ?xrange= and ?step= draw on them, and on the training-time axis
they keep steps and say so."""

from urllib.parse import parse_qs, urlparse

import pytest

from tests.drawn_charts import drawn_element
from tests.factories import make_run
from tests.helpers import REPO_ROOT, wait_for
from tests.ui.chart_helpers import drag_across, drag_element, element_ticks, ticks
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint, StepRecord

pytestmark = [pytest.mark.browser, pytest.mark.slow]
STEPS = 60
PANELS = ("collapse-mi", "reward-std-hist-plot")


def make_panel_run(user):
    run = make_run(user, status=Run.Status.COMPLETED, step=STEPS, total_steps=STEPS)
    points = [(s, "train/success", (s * s % 7) / 7) for s in range(STEPS)]
    points += [(s, "time/step_s", 30.0) for s in range(STEPS)]
    for i, step in enumerate(range(0, STEPS, 5)):
        points += [
            (step, "collapse/mi_estimate", max(0.6 - 0.05 * i, 0.02)),
            (step, "collapse/retrieval_acc", max(0.9 - 0.05 * i, 0.25)),
            (step, "collapse/retrieval_chance", 0.25),
            (step, "collapse/conditional_entropy", 1.2 + 0.1 * i),
        ]
    MetricPoint.upsert(run.pk, points)
    StepRecord.objects.bulk_create(
        StepRecord(run=run, step=s, key="train/reward_std_hist", values=[0.5 / (1 + s) * g for g in range(8)])
        for s in range(STEPS)
    )
    return run


def open_run(page, run, query=""):
    page.goto(f"{page.base}/runs/{run.pk}/{query}")
    page.wait_for_selector("#chart-success .scatterlayer .trace path.js-line")
    page.wait_for_selector("#collapse-mi .scatterlayer .trace")
    page.wait_for_selector("#reward-std-hist-plot .hm")


def url_xrange(page):
    low, high = (float(x) for x in parse_qs(urlparse(page.url).query)["xrange"][0].split(","))
    return low, high


def screenshot(page, name):
    """The heat strip and the collapse panel's MI chart, on screen together."""
    page.evaluate("document.getElementById('reward-std-hist').scrollIntoView()")
    page.screenshot(path=str(REPO_ROOT / "test-artifacts" / "runs" / name))


def shows_range(page, element_id, low, high):
    """The chart's x ticks lie in [low, high] and span most of it: it is drawn over that range."""
    drawn_ticks = element_ticks(page, element_id)
    return (
        len(drawn_ticks) >= 2
        and low <= min(drawn_ticks)
        and max(drawn_ticks) <= high
        and max(drawn_ticks) - min(drawn_ticks) >= (high - low) / 2
    )


def test_zoom_on_a_chart_zooms_the_panels_and_a_zoom_on_a_panel_zooms_the_charts(page):
    run = make_panel_run(page.user)
    open_run(page, run)
    for element_id in PANELS:
        assert max(element_ticks(page, element_id)) >= 50  # the whole run before any zoom

    drag_across(page, "success")
    wait_for(lambda: "xrange=" in page.url, timeout=10, message="the success chart zoomed")
    low, high = url_xrange(page)
    assert 5 < low < high < 45
    for element_id in PANELS:
        wait_for(
            lambda: shows_range(page, element_id, low, high), timeout=10, message=f"{element_id} follows"
        )
    screenshot(page, "run-panels-follow-zoom.png")

    page.dblclick("#chart-success .nsewdrag")  # back to the whole run, everywhere
    wait_for(lambda: "xrange=" not in page.url, timeout=10, message="zoom reset")
    for element_id in PANELS:
        wait_for(
            lambda: max(element_ticks(page, element_id)) >= 50, timeout=10, message=f"{element_id} reset"
        )

    drag_element(page, "collapse-mi", 0.5, 0.8)
    wait_for(lambda: "xrange=" in page.url, timeout=10, message="the MI chart's zoom in the URL")
    low, high = url_xrange(page)
    assert 20 < low < high <= STEPS
    wait_for(lambda: shows_range(page, "chart-success", low, high), timeout=10, message="success follows MI")
    wait_for(
        lambda: shows_range(page, "reward-std-hist-plot", low, high), timeout=10, message="heat strip too"
    )


def test_address_range_and_cursor_draw_on_the_panels_and_time_axis_keeps_their_steps(page):
    run = make_panel_run(page.user)
    open_run(page, run, "?xrange=10,50&step=20")
    for element_id in ("chart-success",) + PANELS:
        wait_for(lambda: shows_range(page, element_id, 10, 50), timeout=10, message=f"{element_id} at 10-50")
        assert "step 20" in drawn_element(page, element_id)["texts"]  # the cursor's label
        assert drawn_element(page, element_id)["shapes"] >= 1  # and its line
    screenshot(page, "run-panels-cursor.png")

    page.get_by_label("X axis").select_option("time")
    x_title = page.locator("#collapse-mi .g-xtitle text")
    wait_for(
        lambda: "not training time" in x_title.text_content(), timeout=10, message="MI says it keeps steps"
    )
    assert "not training time" in page.locator("#reward-std-hist-plot .g-xtitle text").text_content()
    assert max(element_ticks(page, "collapse-mi")) >= 50  # steps, the whole run: no minutes range on steps
    assert "step 20" in drawn_element(page, "collapse-mi")["texts"]  # the cursor is a step: still shown

    drag_element(page, "collapse-mi", 0.5, 0.8)  # zooms itself only: a step range means nothing in minutes
    wait_for(lambda: max(element_ticks(page, "collapse-mi")) < 50, timeout=10, message="the MI chart zoomed")
    assert "xrange=" not in page.url
    assert max(ticks(page, "success")) <= 30  # the charts keep their minutes
    screenshot(page, "run-panels-time-axis.png")


def rows_of(page, region_name):
    region = page.get_by_role("region", name=region_name)
    return [row.locator("th, td").all_inner_texts() for row in region.locator("tbody tr").all()]


def test_the_panels_values_as_tables_for_a_reader_who_cannot_see_the_charts(page):
    """The heat strip and the collapse panel were drawings only (the accessibility audit's finding): each has
    its values as a table, a row per step, following the page's zoom."""
    run = make_panel_run(page.user)
    open_run(page, run, "?xrange=10,20")
    page.get_by_text("The measurements as a table").click()
    collapse = "Template collapse measurements as a table"
    wait_for(lambda: rows_of(page, collapse), timeout=10, message="the collapse table")
    header = page.get_by_role("region", name=collapse).locator("thead th").all_inner_texts()
    assert header == [
        "step",
        "MI estimate (nats)",
        "retrieval accuracy",
        "chance",
        "conditional entropy (nats/token)",
    ]
    # measured every 5 steps (i = step / 5): MI 0.6 - 0.05 i, retrieval 0.9 - 0.05 i, entropy 1.2 + 0.1 i
    assert rows_of(page, collapse) == [
        ["10", "0.5", "0.8", "0.25", "1.4"],
        ["15", "0.45", "0.75", "0.25", "1.5"],
        ["20", "0.4", "0.7", "0.25", "1.6"],
    ]

    page.get_by_text("The groups per std bin as a table").click()
    strip = "In-group reward std of every group as a table"
    wait_for(lambda: rows_of(page, strip), timeout=10, message="the heat strip's table")
    rows = rows_of(page, strip)
    assert [row[0] for row in rows] == [str(s) for s in range(10, 21)]
    assert {row[1] for row in rows} == {"8"}  # 8 groups a step, each counted in one bin
    assert all(sum(int(count) for count in row[2:]) == 8 for row in rows)
    # step 10's groups: std 0.5 / 11 x g for g = 0..7, all within the lowest bins of the run's range
    header = page.get_by_role("region", name=strip).locator("thead th").all_inner_texts()
    assert header[:3] == ["step", "groups", "std 0–0.175"]

    page.get_by_role("button", name="Whole run").click()
    wait_for(lambda: len(rows_of(page, strip)) == STEPS, timeout=10, message="every step's row")
    assert len(rows_of(page, collapse)) == STEPS // 5
