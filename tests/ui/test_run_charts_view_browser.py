"""The run page's chart view in real chromium: the x axis by step or by training time, a zoom on one chart
zooms every chart, the view (axis, zoom, smoothing) lives in the URL and a copied address reopens it, and
a chart can show its points as a table."""

from urllib.parse import parse_qs, urlparse

import pytest

from tests.drawn_charts import drawn, last_tick
from tests.factories import insert_series, make_experiment, make_run
from tests.helpers import REPO_ROOT, wait_for
from tests.ui.chart_helpers import drag_across, ticks
from webapp.alerts.models import DetectorEvent
from webapp.core import chart_view
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"
STEPS = 60
STEP_SECONDS = 30.0  # 60 steps of 30 s: 30 minutes of training


def test_time_axis_synced_zoom_view_in_the_url_and_table(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, step=STEPS, total_steps=STEPS)
    zigzag = [(s * s % 7) / 7 for s in range(STEPS)]
    MetricPoint.upsert(
        run.pk,
        [(s, "train/success", zigzag[s]) for s in range(STEPS)]
        + [(s, "actor/entropy", 1 + zigzag[(s + 3) % STEPS]) for s in range(STEPS)]
        + [(s, "time/step_s", STEP_SECONDS) for s in range(STEPS)],
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_selector("#chart-success .scatterlayer .trace path.js-line")
    assert 50 <= last_tick(page, "success") < STEPS

    # Training time: the same curve against minutes, 30 at the end.
    page.get_by_label("X axis").select_option("time")
    x_title = page.locator("#chart-success .g-xtitle text")
    wait_for(
        lambda: x_title.text_content().startswith("training time (minutes"), timeout=10, message="time axis"
    )
    assert 25 <= last_tick(page, "success") <= 30
    assert 25 <= last_tick(page, "entropy") <= 30
    assert parse_qs(urlparse(page.url).query)["x"] == ["time"]
    page.get_by_label("X axis").select_option("step")

    # A drag on the success chart zooms the entropy chart to the same steps.
    drag_across(page, "success")
    wait_for(lambda: last_tick(page, "success") < 45, timeout=10, message="the success chart zoomed")
    wait_for(lambda: ticks(page, "entropy") == ticks(page, "success"), timeout=10, message="entropy follows")
    zoomed = ticks(page, "success")
    xrange = parse_qs(urlparse(page.url).query)["xrange"][0]
    low, high = (float(x) for x in xrange.split(","))
    assert 5 < low < high < 45 and min(zoomed) >= low and max(zoomed) <= high
    page.screenshot(path=str(ARTIFACTS / "run-charts-synced-zoom.png"), full_page=False)

    # Smoothing goes into the URL too; the copied address reopens the same view.
    page.locator("#smoothing").fill("0.6")
    wait_for(lambda: "smooth=0.6" in page.url, timeout=5, message="smoothing in the URL")
    shared = page.url
    page.goto(f"{page.base}/")
    page.goto(shared)
    page.wait_for_selector("#chart-success .scatterlayer .trace path.js-line")
    wait_for(lambda: ticks(page, "success") == zoomed, timeout=10, message="the zoom restored")
    assert ticks(page, "entropy") == zoomed
    assert page.locator("#smoothing-value").inner_text() == "0.6"
    assert len(drawn(page, "success")["lines"]) == 2  # the raw line and the smoothed one

    # Show as table: the chart's rows in the zoom range, the smoothed column beside the value.
    page.get_by_label("Show Success (train and validation) as a table").check()
    table = page.get_by_role("region", name="Success (train and validation) as a table")
    assert table.is_visible() and not page.locator("#chart-success").is_visible()
    headers = table.locator("thead th").all_inner_texts()
    assert headers == ["step", "minutes", "train/success", "train/success (smoothed)"]
    steps = [
        int(cell) for cell in table.locator("tbody tr th").all_inner_texts()
    ]  # each row headed by its step
    assert steps == [s for s in range(STEPS) if low <= s <= high]
    first = table.locator("tbody tr").first.locator("th, td").all_inner_texts()
    assert float(first[2]) == pytest.approx(zigzag[steps[0]], abs=1e-4)
    # four significant digits, as the hover and the messages write them
    smoothed = table.locator("tbody tr td:nth-child(4)").all_inner_texts()
    assert all(len(cell.lstrip("-0.").replace(".", "")) <= 4 for cell in smoothed), smoothed
    assert float(first[1]) == pytest.approx((steps[0] + 1) * STEP_SECONDS / 60, abs=1e-3)
    page.screenshot(path=str(ARTIFACTS / "run-chart-as-table.png"), full_page=False)
    page.get_by_label("Show Success (train and validation) as a table").uncheck()
    assert page.locator("#chart-success").is_visible() and not table.count()


def test_the_charts_keep_their_height_when_the_window_is_narrowed(page):
    """Plotly resizes a plot to its box with the window: without a height of its own the box was 0 px, and
    every chart vanished until a reload (a tester narrowed the window to 700 px)."""
    run = make_run(page.user, status=Run.Status.COMPLETED, step=20, total_steps=20)
    MetricPoint.upsert(
        run.pk,
        [(s, "train/success", (s % 7) / 7) for s in range(20)]
        + [
            (s, key, 0.3 + s / 100)
            for s in range(0, 20, 5)
            for key in ("collapse/mi_estimate", "collapse/retrieval_acc")
        ],
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_selector("#chart-success .scatterlayer .trace path.js-line")
    page.wait_for_selector("#collapse-mi .scatterlayer .trace")

    def heights():
        return {
            name: page.locator(selector).bounding_box()["height"]
            for name, selector in (("success", "#chart-success"), ("mi", "#collapse-mi"))
        }

    assert heights() == {"success": 280, "mi": 320}
    for width in (700, 390):
        page.set_viewport_size({"width": width, "height": 1000})
        page.wait_for_timeout(600)  # Plotly's resize waits for the window to settle
        assert heights() == {"success": 280, "mi": 320}, width
        assert page.locator("#chart-success .scatterlayer .trace path.js-line").is_visible()


def test_the_page_reads_the_addresss_numbers_as_its_notices_do(page):
    """?xrange=0x0,0x10 zoomed to 0..16 under a notice that said every step was shown; ?xrange=1_0,2_0
    showed every step without one. One grammar, here and in webapp.core.chart_view."""
    run = make_run(page.user, status=Run.Status.COMPLETED, step=5, total_steps=5)
    page.goto(f"{page.base}/runs/{run.pk}/")
    texts = [
        "10",
        "-2.5",
        ".5",
        "5.",
        "1e3",
        "+1",
        "1E-2",
        "0x10",
        "1_0",
        " 1",
        "1 ",
        "inf",
        "Infinity",
        "nan",
        "",
        "-",
        "1e",
        "\u0663",
        "\uff11",
        "1e400",
        "0b1",
        "1,2",
    ]
    read = page.evaluate("texts => texts.map(t => Number.isFinite(EchoChartView.decimal(t)))", texts)
    assert dict(zip(texts, read)) == {text: chart_view._number_within(text) for text in texts}
    assert read[:7] == [True] * 7 and not any(read[7:])


def test_a_run_without_step_times_says_it_has_no_time_axis(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, step=5, total_steps=5)
    MetricPoint.upsert(run.pk, [(s, "train/success", s / 5) for s in range(5)])
    DetectorEvent.objects.create(run=run, step=3, level="warning", rule="reward_std_drop", message="std fell")
    page.goto(f"{page.base}/runs/{run.pk}/?x=time")
    note = page.locator("#x-axis-note")
    note.wait_for()
    assert (
        note.inner_text() == "this run logged no time/step_s: no training time to draw against"
    )  # no "yet": it ended
    assert page.get_by_label("X axis").input_value() == "time"
    chart = page.locator("#chart-success")
    chart.get_by_text("no time/step_s logged: nothing to draw against training time").wait_for()
    assert chart.locator(".scatterlayer .trace").count() == 0, "drew the values against their index"
    assert chart.locator(".shapelayer path").count() == 0, "drew the event's line with no x for it"
    # Back to steps, the finished run's clockless axis is not offered again
    page.get_by_label("X axis").select_option("step")
    option = page.locator("#x-axis option[value=time]")
    assert option.is_disabled() and option.inner_text() == "training time (not logged)"
    assert note.is_hidden()


def test_a_trl_run_draws_against_the_sum_of_its_own_step_times(page):
    """TRL logs `step_time` (seconds an optimizer step took; here every 10 steps, as with logging_steps=10):
    its training time is their sum, each counted for the steps since the last, and the axis says so."""
    run = make_run(
        page.user,
        experiment=make_experiment(page.user, imported=True),
        status=Run.Status.COMPLETED,
        step=STEPS,
        latest_metrics={"train/success": 0.5, "step_time": STEP_SECONDS},
    )
    MetricPoint.upsert(
        run.pk,
        [(s, "train/success", (s % 7) / 7) for s in range(10, STEPS + 1, 10)]
        + [(s, "step_time", STEP_SECONDS) for s in range(10, STEPS + 1, 10)],
    )
    page.goto(f"{page.base}/runs/{run.pk}/?x=time")
    x_title = page.locator("#chart-success .g-xtitle text")
    wait_for(
        lambda: x_title.text_content() == "training time (minutes, sum of step_time)",
        timeout=10,
        message="axis",
    )
    assert page.locator("#x-axis-note").is_hidden()
    page.get_by_label("Show Success (train and validation) as a table").check()
    table = page.get_by_role("region", name="Success (train and validation) as a table")
    minutes = [float(cell) for cell in table.locator("tbody tr td:nth-child(2)").all_inner_texts()]
    # The first value counts for its own step (the steps before it are unknown), each later one for ten.
    assert minutes == [pytest.approx(m) for m in (0.5, 5.5, 10.5, 15.5, 20.5, 25.5)]
    assert Run.objects.get(pk=run.pk).clock_key == "step_time"
    run.latest_metrics["time/step_s"] = 1.0  # ours, where a run logs both
    assert run.clock_key == "time/step_s"


def test_a_long_run_whose_step_times_vary_is_drawn_against_all_of_its_time(page):
    """20,000 steps, every tenth 60 s and the others 2 s: 2,600 minutes. Downsampled to 1,000 buckets of
    20 steps, each bucket's last value is a 2 s step: summed alone they told 667 minutes."""
    run = make_run(page.user, status=Run.Status.COMPLETED, step=20_000, total_steps=20_000)
    insert_series(run, "train/success", 20_000, "0.5 + 0.4 * sin(s / 500.0)")
    insert_series(run, "time/step_s", 20_000, "CASE WHEN mod(s, 10) = 5 THEN 60.0 ELSE 2.0 END")
    page.goto(f"{page.base}/runs/{run.pk}/?x=time")
    x_title = page.locator("#chart-success .g-xtitle text")
    wait_for(lambda: x_title.text_content().startswith("training time (minutes"), timeout=10, message="axis")
    wait_for(lambda: last_tick(page, "success") >= 2_500, timeout=10, message="the run's 2,600 minutes")
    assert last_tick(page, "success") < 2_700
    page.locator("#chart-success").screenshot(path=str(ARTIFACTS / "time-axis-varying-step-times.png"))


def test_a_zoom_into_a_long_run_shows_its_own_points(page):
    """A tester's 20,000-step run zoomed to 100 steps drew (and tabled) 5 buckets' last values as if they
    were the points, the one-step spike in them in none. Unzoomed, the table says its rows are buckets and
    keeps each bucket's lowest and highest; zoomed, the page fetches the range's own points."""
    run = make_run(page.user, status=Run.Status.COMPLETED, step=20_000, total_steps=20_000)
    insert_series(run, "train/success", 20_000, "0.5 + 0.1 * mod(s, 2)")  # a zigzag: a vertex a point
    MetricPoint.upsert(run.pk, [(12_345, "train/success", 1.0)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    # Drawn first: the page settling under the switch while it was clicked left it unticked (CI, busy cores)
    wait_for(lambda: drawn(page, "success")["lines"], timeout=30, message="the success chart")
    page.get_by_label("Show Success (train and validation) as a table").check()
    table = page.get_by_role("region", name="Success (train and validation) as a table")
    caption = table.locator("caption")
    wait_for(lambda: "rows)" in caption.inner_text(), timeout=10, message="the table")
    assert caption.inner_text().startswith(
        "Success (train and validation) (1000 rows). Downsampled: each row"
    )
    headers = table.locator("thead th").all_inner_texts()
    assert headers == ["step", "train/success", "train/success (bucket min)", "train/success (bucket max)"]
    rows = [row.split("\t") for row in table.locator("tbody tr").all_inner_texts()]
    # each bucket of 20 steps ends on an odd step (0.6) and holds 0.5 and 0.6; the spike's holds 1
    assert {row[1] for row in rows} == {"0.6"} and ["0.5", "1"] in [row[2:] for row in rows]

    page.goto(f"{page.base}/runs/{run.pk}/?xrange=12300,12400")
    # Drawn first: the page settling under the switch while it was clicked left it unticked (CI, busy cores)
    wait_for(lambda: drawn(page, "success")["lines"], timeout=30, message="the success chart")
    page.get_by_label("Show Success (train and validation) as a table").check()
    wait_for(lambda: "(101 rows)" in caption.inner_text(), timeout=10, message="the range's own points")
    assert "Downsampled" not in caption.inner_text()
    rows = [row.split("\t") for row in table.locator("tbody tr").all_inner_texts()]
    assert (
        rows[:2] == [["12300", "0.5"], ["12301", "0.6"]] and rows[45] == ["12345", "1"] and len(rows) == 101
    )
    page.get_by_label("Show Success (train and validation) as a table").uncheck()
    assert max(drawn(page, "success")["lines"]) >= 100  # the chart draws every point of the range
    page.locator("#chart-success").screenshot(path=str(ARTIFACTS / "zoom-into-a-long-run.png"))


def test_charts_share_one_x_range_and_a_double_click_gives_the_whole_run_back(page):
    # Validation every 20 steps, entropy logged from step 30: unzoomed, every chart is drawn over the run's
    # steps, so the cursor and the event lines fall at one x on each.
    run = make_run(page.user, status=Run.Status.COMPLETED, step=STEPS, total_steps=STEPS)
    MetricPoint.upsert(
        run.pk,
        [(s, "train/success", (s * s % 7) / 7) for s in range(STEPS)]
        + [(s, "val/success", 0.5) for s in range(0, 41, 20)]
        + [(s, "actor/entropy", 1.0 + s / 100) for s in range(30, STEPS)],
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_selector("#chart-entropy .scatterlayer .trace path.js-line")
    whole = sorted(ticks(page, "success"))  # in the DOM, reused tick labels keep their places
    assert min(whole) <= 0 and max(whole) >= 50
    assert sorted(ticks(page, "entropy")) == whole
    assert page.locator("#chart-grad_norm").is_hidden()  # never logged by this finished run: named, not drawn
    page.screenshot(path=str(ARTIFACTS / "run-charts-one-x-range.png"), full_page=False)
    # Each chart has a name a screen reader says, not only its tick labels.
    figure = page.get_by_role(
        "figure", name="Chart: Success (train and validation) (train/success, val/success)"
    )
    assert figure.locator("#chart-success").count() == 1

    drag_across(page, "entropy")
    wait_for(lambda: "xrange=" in page.url, timeout=10, message="the entropy chart zoomed")
    wait_for(lambda: sorted(ticks(page, "success")) != whole, timeout=10, message="the success chart follows")
    page.locator("#chart-success .nsewdrag").dblclick()
    wait_for(lambda: "xrange=" not in page.url, timeout=10, message="a double click unzooms")
    wait_for(lambda: sorted(ticks(page, "entropy")) == whole, timeout=10, message="the whole run again")
    assert sorted(ticks(page, "success")) == whole
