"""The run page in a real browser: charts draw, live polling appends without losing the user's zoom,
and stops when the run ends."""

import re
import time

import pytest
from playwright.sync_api import expect

from tests.drawn_charts import drawn, last_tick, write_points
from tests.factories import insert_series, make_experiment, make_run, streamed_run
from tests.helpers import REPO_ROOT, answer_next_dialog, wait_for
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "runs"


def trace_steps(page, chart, trace=-1):
    return page.evaluate(
        f"(() => {{ const d = document.getElementById('chart-{chart}').data;"
        f" const t = d[d.length + ({trace}) ] ; return t ? Array.from(t.x) : []; }})()"
    )


def test_a_resumed_run_in_the_queue_keeps_saying_it_has_no_worker_yet_as_the_page_polls(page):
    run = make_run(page.user, host="vm", attempt=1)  # queued again after an attempt on "vm"
    polls = []
    page.on("request", lambda request: "/metrics" in request.url and polls.append(request.url))
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: len(polls) >= 2, timeout=15, message="two polls")
    assert page.locator("#run-host").inner_text() == "none yet (the last attempt ran on vm)"
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, host="gpu-2", attempt=2)
    page.locator("#run-host").get_by_text("gpu-2").wait_for(timeout=15_000)


def test_a_page_opened_before_the_first_point_draws_each_poll_and_live_detector_markers(page):
    run = make_run(page.user, status=Run.Status.RUNNING, step=0, total_steps=40)
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_selector("#poll-state:has-text('live')")
    before = drawn(page, "success")
    assert before["lines"] == [] and "no data yet" in before["texts"]
    assert before["xticks"] == [] and before["yticks"] == []  # no made-up -1..6 scale beside the note

    # First poll with points: four vertices drawn, the x axis reaches step 3.
    # No three consecutive points in line: Plotly drops the middle vertex of a straight run.
    zigzag = {s: (s * s % 7) / 7 for s in range(9)}
    write_points(run.pk, [(s, "train/success", zigzag[s]) for s in range(4)])
    wait_for(lambda: drawn(page, "success")["lines"] == [4], timeout=15, message="4 drawn vertices")
    assert 2 <= last_tick(page, "success") <= 3
    assert "no data yet" not in drawn(page, "success")["texts"] and drawn(page, "success")["yticks"]

    # Next poll: the same line gains vertices and the axis extends; nothing reloaded the page.
    page.evaluate("window.notReloaded = true")
    write_points(run.pk, [(s, "train/success", zigzag[s]) for s in range(4, 9)])
    wait_for(lambda: drawn(page, "success")["lines"] == [9], timeout=15, message="9 drawn vertices")
    assert last_tick(page, "success") >= 6
    assert page.evaluate("window.notReloaded") is True

    # A detector event appears on every chart as a marker and a vertical line, without a reload.
    assert drawn(page, "success")["markers"] == [9]  # a short series marks its points
    assert not page.locator("#event-key").is_visible()
    DetectorEvent.objects.create(run=run, step=7, level="warning", rule="reward_std_drop", message="std fell")
    wait_for(lambda: drawn(page, "success")["markers"] == [9, 1], timeout=15, message="a live event marker")
    assert drawn(page, "success")["shapes"] >= 1
    # ... with the key to the markers' shapes and colours, the warning's in the key's colour
    assert (
        page.locator("#event-key")
        .inner_text()
        .startswith(
            "The detector's markers on the charts: ◇ info, ○ warning, × collapse (a solid line), △ resolved."
        )
    )
    events = page.locator("#chart-success .scatterlayer .trace").last.locator("path.point")
    key_colour = page.locator("#event-key .event-warning").evaluate("e => getComputedStyle(e).color")
    assert events.first.evaluate("e => e.style.stroke") == key_colour == "rgb(230, 159, 0)"
    # ... and a level told by its shape too, not by colour alone (as a person with red-green colour
    # blindness reads the chart): an info marker is drawn in another shape than the warning's.
    DetectorEvent.objects.create(run=run, step=3, level="info", rule="grad_spike", message="one spike")
    wait_for(lambda: drawn(page, "success")["markers"] == [9, 2], timeout=15, message="a second event marker")
    shapes = events.evaluate_all("points => points.map((p) => p.getAttribute('d'))")
    assert len(set(shapes)) == 2, shapes
    page.screenshot(path=str(ARTIFACTS / "run-live.png"), full_page=True)

    # Progress as the API reports it (Run.progress_percent), not a second formula in the page: a step
    # past total_steps (a resumed run's recount) reads 100%, never more.
    for step, text in ((10, "10 / 40 steps done (25%)"), (50, "50 / 40 steps done (100%)")):
        Run.objects.filter(pk=run.pk).update(step=step)
        wait_for(
            lambda text=text: page.locator("#run-progress-text").inner_text() == text,
            timeout=15,
            message=text,
        )


def test_a_resumed_attempt_logging_steps_again_is_redrawn_with_its_values(page):
    run = make_run(page.user, status=Run.Status.RUNNING, step=0, total_steps=40)
    zigzag = {s: (s * s % 7) / 7 for s in range(12)}
    write_points(run.pk, [(s, "train/success", zigzag[s]) for s in range(9)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: drawn(page, "success")["lines"] == [9], timeout=15, message="9 drawn vertices")
    assert max(float(t) for t in drawn(page, "success")["yticks"]) < 1.5

    # The worker was lost; the next attempt resumes from the checkpoint before step 5 and logs steps
    # 5-8 again, with other values, then goes on (9-11 below 1, like the first attempt's).
    Run.objects.filter(pk=run.pk).update(attempt=2)
    again = [(s, "train/success", 4 + zigzag[s] if s < 9 else zigzag[s]) for s in range(5, 12)]
    write_points(run.pk, again)
    wait_for(lambda: drawn(page, "success")["lines"] == [12], timeout=15, message="12 drawn vertices")
    wait_for(
        lambda: max(float(t) for t in drawn(page, "success")["yticks"]) >= 4,
        timeout=15,
        message="the steps logged again drawn with their new values",
    )


def test_a_step_sent_again_or_late_is_redrawn_live(page):
    """A script retries a batch with other values, and logs a skipped step afterwards: the open page
    draws both without a reload (it polls only the steps after the last one it holds)."""
    run = make_run(page.user, status=Run.Status.RUNNING, step=0, total_steps=40)
    zigzag = {s: (s * s % 7) / 7 for s in range(12)}
    write_points(run.pk, [(s, "train/success", zigzag[s]) for s in range(10) if s != 5])
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: drawn(page, "success")["lines"] == [9], timeout=15, message="9 drawn vertices")
    write_points(run.pk, [(3, "train/success", 4.0), (5, "train/success", 0.55)])
    wait_for(
        lambda: (
            drawn(page, "success")["lines"] == [10]
            and max(float(t) for t in drawn(page, "success")["yticks"]) >= 4
        ),
        timeout=15,
        message="step 3's new value and the late step 5 drawn",
    )


def test_an_ended_mlflow_run_that_runs_again_goes_live_on_its_open_page(page):
    """Its client logged after the sweeper marked it lost: the run runs again (webapp.tracking)."""
    experiment = make_experiment(page.user, "trl", imported=True)
    run = make_run(page.user, experiment=experiment, status=Run.Status.FAILED, step=3, host="mlflow client")
    page.goto(f"{page.base}/runs/{run.pk}/")
    assert page.locator("#run-status").inner_text() == "Failed"
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING, finished_at=None)
    wait_for(
        lambda: page.locator("#run-status").inner_text() == "Running",
        timeout=25,
        message="the page live again",
    )


def test_a_live_run_trained_elsewhere_leaves_out_the_charts_of_keys_it_has_not_logged(page):
    """Its script may never log our keys: no screenful of "no data yet" axes while it runs; a standard key
    it logs later draws its chart then."""
    run = streamed_run(page.user, step=3)
    write_points(run.pk, [(s, "loss", 1 / (s + 1)) for s in range(3)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_selector("#poll-state:has-text('live')")
    wait_for(lambda: drawn(page, "logged-0")["lines"] == [3], timeout=15, message="its own key drawn")
    assert page.locator("#chart-success").is_hidden()
    note = page.locator("#not-logged").inner_text()
    assert note.startswith("Not logged by this run so far, so not drawn: ") and "Success" in note

    # A key first logged after the page was drawn: the page reloads to chart it (reading the chart while it
    # reloaded failed now and then: "Execution context was destroyed")
    with page.expect_navigation(timeout=15_000):
        write_points(run.pk, [(3, "train/success", 0.5), (4, "train/success", 0.75)])
    wait_for(lambda: drawn(page, "success")["lines"] == [2], timeout=15, message="success drawn once logged")
    assert "Success" not in page.locator("#not-logged").inner_text()


def test_live_charts_keep_zoom_and_stop_polling_when_the_run_ends(page):
    run = make_run(page.user, status=Run.Status.RUNNING, step=3000, total_steps=4000)
    insert_series(run, "actor/grad_norm", 3000, "1 + sin(s)")
    MetricPoint.upsert(run.pk, [(1234, "actor/grad_norm", 500)])
    MetricPoint.upsert(run.pk, [(s, "train/success", s / 3000) for s in range(0, 3000, 10)])

    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_function("document.getElementById('chart-grad_norm').data !== undefined")
    grad = page.evaluate(
        "document.getElementById('chart-grad_norm').data.map(t => [t.fill || '', t.y.length])"
    )
    assert grad == [["", 1000], ["tonexty", 1000], ["", 1000]]  # band upper, band lower, line
    assert page.evaluate("Math.max(...document.getElementById('chart-grad_norm').data[0].y)") == 500
    assert page.evaluate("document.getElementById('chart-grad_norm').layout.yaxis.type") == "log"

    page.evaluate("Plotly.relayout('chart-success', {'xaxis.range': [100, 200]})")
    MetricPoint.upsert(run.pk, [(3000, "train/success", 0.9), (3001, "train/success", 0.95)])
    wait_for(lambda: trace_steps(page, "success")[-1:] == [3001], timeout=15, message="appended points")
    assert page.evaluate("document.getElementById('chart-success').layout.xaxis.range") == [100, 200]
    assert trace_steps(page, "success")[-3:] == [2990, 3000, 3001]

    # The live page reloads once when the run ends, to show its final state.
    with page.expect_navigation(timeout=15_000):
        Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, step=3002)
    page.wait_for_function("document.getElementById('chart-success').data !== undefined")
    assert page.locator("#run-status").text_content() == "Completed"
    requests = []
    page.on("request", lambda request: requests.append(request.url) if "/metrics" in request.url else None)
    time.sleep(5)
    assert requests == []
    assert page.locator("#stop-form").count() == 0


def test_smoothing_is_a_debiased_ema_that_keeps_gaps(page):
    run = make_run(page.user, status=Run.Status.COMPLETED)
    MetricPoint.upsert(
        run.pk, [(0, "train/success", 1.0), (1, "train/success", float("nan")), (2, "train/success", 3.0)]
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_function("document.getElementById('chart-success').data !== undefined")
    assert page.evaluate("EchoSmoothing.ema([1, null, 3], 0.5)") == [1, None, pytest.approx(7 / 3)]
    page.locator("#smoothing").fill("0.5")
    page.locator("#smoothing").dispatch_event("input")
    smoothed = page.evaluate(
        "document.getElementById('chart-success').data.map(t => [t.name, Array.from(t.y)])"
    )
    assert smoothed == [
        ["train/success", [1, None, 3]],
        ["train/success (smoothed)", [1, None, pytest.approx(7 / 3)]],
    ]


def test_one_validation_chart_per_validation_environment(page, tmp_path):
    """rollout.val_envs adds a chart per environment, titled with its name, drawing val/<env>/success."""
    run = make_run(
        page.user,
        status=Run.Status.COMPLETED,
        config={
            "model": {"name": "tiny"},
            "env": {"name": "sokoban"},
            "rollout": {"group_size": 4, "val_envs": ["frozenlake", "sokoban-alternate"]},
        },
    )
    MetricPoint.upsert(run.pk, [(s, "val/frozenlake/success", s / 100) for s in range(0, 60, 10)])
    MetricPoint.upsert(run.pk, [(s, "val/success", 0.5) for s in range(0, 60, 10)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    chart = page.locator("#chart-val_frozenlake")
    chart.locator("path.js-line").first.wait_for(timeout=15_000)
    assert chart.locator(".gtitle").text_content() == "Validation success on frozenlake"
    # The run ended without a point for the other environment: its chart is named, not drawn empty.
    assert page.locator("#chart-val_sokoban-alternate").is_hidden()
    assert "Validation success on sokoban-alternate" in page.locator("#not-logged").inner_text()
    chart.screenshot(path=str(tmp_path / "val_chart.png"))


def test_a_single_point_is_drawn_and_the_toolbar_has_no_share_button(page):
    run = make_run(page.user, status=Run.Status.COMPLETED)
    MetricPoint.upsert(run.pk, [(5, "actor/entropy", 1.5)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#chart-entropy .scatterlayer .trace') !== null")
    assert drawn(page, "entropy")["markers"] == [1]
    assert drawn(page, "entropy")["xticks"] == ["5"]  # its own step, not -1 to 1 ticked at halves
    page.hover("#chart-entropy")
    titles = page.eval_on_selector_all(
        "#chart-entropy .modebar-btn", "buttons => buttons.map(b => b.dataset.title)"
    )
    # Four buttons, so the toolbar stays clear of a half-width chart's centred title
    assert titles == ["Download plot as a PNG", "Zoom", "Pan", "Reset axes"]
    # Tabbing through the page never stops on a toolbar button (9 a chart, 50 charts on a run page)
    page.locator("#chart-entropy").click()
    for _ in range(40):
        page.keyboard.press("Tab")
        assert not page.evaluate("document.activeElement.classList.contains('modebar-btn')")


def test_the_first_steps_of_a_run_are_ticked_as_whole_steps(page):
    run = make_run(page.user, status=Run.Status.COMPLETED)
    MetricPoint.upsert(run.pk, [(0, "actor/entropy", 1.5), (1, "actor/entropy", 1.4)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#chart-entropy .scatterlayer .trace') !== null")
    assert drawn(page, "entropy")["xticks"] == ["0", "1"]  # not 0, 0.2, 0.4 ... 1


def test_a_chart_of_values_never_negative_has_no_negative_axis(page):
    run = make_run(page.user, status=Run.Status.COMPLETED)
    MetricPoint.upsert(run.pk, [(s, "train/frac_zero_std_groups", 0.0) for s in range(5)])
    MetricPoint.upsert(run.pk, [(s, "actor/entropy", 0.5 - s / 4) for s in range(5)])  # goes below 0
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#chart-zero_std .scatterlayer .trace') !== null")
    page.wait_for_function("document.querySelector('#chart-entropy .scatterlayer .trace') !== null")
    ticks = [float(t.replace("\u2212", "-")) for t in drawn(page, "zero_std")["yticks"] if t]
    assert min(ticks) == 0  # Plotly drew a chart of zeros from -1 to 1
    assert min(float(t.replace("\u2212", "-")) for t in drawn(page, "entropy")["yticks"] if t) < 0


def test_step_in_the_url_and_a_click_in_the_events_list_move_every_charts_cursor(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, step=50, total_steps=50)
    MetricPoint.upsert(
        run.pk, [(s, key, (s * s % 7) / 7) for s in range(50) for key in ("train/success", "actor/entropy")]
    )
    DetectorEvent.objects.create(
        run=run,
        step=12,
        level="warning",
        rule="reward_std_drop",
        message="std fell",
        signals={"reward_std": 0.0123456},
    )
    DetectorEvent.objects.create(
        run=run, step=30, level="collapse", rule="entropy_drop", message="entropy fell"
    )
    page.goto(f"{page.base}/runs/{run.pk}/?step=12")
    page.wait_for_selector("#event-list tbody tr")
    for chart in ("success", "entropy"):
        wait_for(lambda: "step 12" in drawn(page, chart)["texts"], timeout=10, message=f"cursor on {chart}")
        assert drawn(page, chart)["shapes"] == 3  # two events and the cursor
    assert page.locator("#chart-kl").is_hidden()  # a finished run's chart of keys it never logged
    assert page.locator("#not-logged").inner_text().startswith("Not logged by this run, so not drawn: ")
    assert page.locator("#cursor-state").inner_text().startswith("Cursor at step 12")
    assert page.locator("#trajectories-link").get_attribute("href") == f"/runs/{run.pk}/trajectories?step=12"
    rows = page.locator("#event-list tbody tr")
    assert rows.count() == 2
    # its time as every page writes one (webapp/formats), not in the browser's locale
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d", rows.nth(0).inner_text().split("\t")[0])
    assert rows.nth(0).inner_text().split("\t")[1:] == [
        "12",
        "warning",
        "reward_std_drop",
        "std fell",
        "reward_std=0.01235",
    ]
    assert "at-cursor" in rows.nth(0).get_attribute("class")

    step_30 = page.get_by_role("button", name="Show step 30 on every chart")
    step_30.focus()
    page.keyboard.press("Enter")  # the rows are drawn anew: the focus stays on this button, not the body
    expect(rows.nth(1)).to_have_attribute("aria-current", "true")  # the cursor's row, not by colour alone
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Show step 30 on every chart"
    for chart in ("success", "entropy"):
        wait_for(
            lambda: "step 30" in drawn(page, chart)["texts"], timeout=10, message=f"cursor moved on {chart}"
        )
        assert "step 12" not in drawn(page, chart)["texts"]
    assert page.url.endswith(f"/runs/{run.pk}/?step=30")
    assert page.locator("#trajectories-link").get_attribute("href") == f"/runs/{run.pk}/trajectories?step=30"
    page.screenshot(path=str(ARTIFACTS / "run-events-cursor.png"), full_page=True)
    page.locator("#cursor-clear").focus()
    page.keyboard.press("Enter")
    wait_for(lambda: drawn(page, "success")["shapes"] == 2, timeout=10, message="cursor cleared")
    # the clear button hides: the focus goes back to the event that set the cursor
    assert page.evaluate("document.activeElement.getAttribute('aria-label')") == "Show step 30 on every chart"
    assert rows.nth(1).get_attribute("aria-current") is None
    assert "step=" not in page.url

    page.goto(f"{page.base}/runs/{run.pk}/?step=twelve")
    assert "step: expected a whole number" in page.locator("#step-error").inner_text()
    page.goto(f"{page.base}/runs/{run.pk}/?step=100000")  # past the run's end: no cursor squashing it
    assert "this run ends at step 49, got 100000" in page.locator("#step-error").inner_text()
    assert page.locator("#cursor-state").is_hidden()


def test_an_imported_run_charts_its_own_columns_and_offers_no_training_controls(page):
    experiment = make_experiment(page.user, "imported: sokoban.csv", imported=True)
    run = make_run(
        page.user,
        experiment=experiment,
        label="imported: sokoban.csv",
        config={},
        status=Run.Status.COMPLETED,
        step=19,
        total_steps=19,
        latest_metrics={"train/success": 0.5, "val-env/SimpleSokoban/success": 0.25, "loss, total": 0.1},
    )
    MetricPoint.upsert(
        run.pk,
        [
            (s, key, (s * s % 7) / 7)
            for s in range(20)
            for key in ("train/success", "val-env/SimpleSokoban/success", "loss, total")
        ],
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_selector(".gtitle:has-text('val-env/SimpleSokoban/success')")
    custom = page.locator(
        ".chart-plot", has=page.locator(".gtitle", has_text="val-env/SimpleSokoban/success")
    )
    chart = custom.get_attribute("id").removeprefix("chart-")
    wait_for(lambda: drawn(page, chart)["lines"] == [20], timeout=10, message="the imported column drawn")
    # a column whose name holds a comma is asked for whole, not as "loss" and "total"
    comma = page.locator(".chart-plot", has=page.locator(".gtitle", has_text="loss, total"))
    chart = comma.get_attribute("id").removeprefix("chart-")
    wait_for(lambda: drawn(page, chart)["lines"] == [20], timeout=10, message="'loss, total' drawn")
    assert page.locator("#chart-entropy").is_hidden()
    assert "Entropy" in page.locator("#not-logged").inner_text()
    actions = page.locator(".run-actions").inner_text()
    assert "Re-run" not in actions and "Trajectories" not in actions and "Export CSV" in actions
    facts = page.locator(".run-facts").inner_text()
    assert "imported from a file" in facts and "not started" not in facts
    assert page.locator("#config-yaml").count() == 0
    page.screenshot(path=str(ARTIFACTS / "run-imported.png"), full_page=True)


def test_stop_asks_first_then_confirms(page):
    run = make_run(page.user, status=Run.Status.RUNNING, step=3, total_steps=40)
    page.goto(f"{page.base}/runs/{run.pk}/")
    questions = answer_next_dialog(page, accept=False)
    page.click("#stop-form button")
    assert questions and questions[0].startswith("Stop seed=1?")
    page.wait_for_timeout(500)
    run.refresh_from_db()
    assert not run.stop_requested  # dismissed: nothing sent

    answer_next_dialog(page, accept=True)
    with page.expect_navigation():
        page.click("#stop-form button")
    assert (
        "Stop requested: the run checkpoints at its next step boundary"
        in page.locator(".messages").inner_text()
    )
    run.refresh_from_db()
    assert run.stop_requested


def test_a_log_scale_says_how_many_values_it_cannot_draw(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, step=20, total_steps=20)
    MetricPoint.upsert(run.pk, [(s, "train/reward_mean", s - 5.5) for s in range(20)])  # 6 below 0
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#chart-reward .scatterlayer .trace') !== null")
    assert not any("not drawn" in text for text in drawn(page, "reward")["texts"])

    def line_starts_at():  # the x pixel of the line's first vertex
        return page.evaluate(
            "parseFloat(document.querySelector('#chart-reward .scatterlayer path.js-line')"
            ".getAttribute('d').slice(1))"
        )

    linear_start = line_starts_at()
    page.get_by_label("Log scale for Reward mean").check()
    wait_for(
        lambda: "6 values ≤ 0 not drawn on the log scale" in drawn(page, "reward")["texts"],
        timeout=10,
        message="the note",
    )
    # The line starts at the first positive value (step 6), not with a drop from the axis's floor at step 0
    assert line_starts_at() > linear_start + 100
    page.locator("#chart-reward").screenshot(path=str(ARTIFACTS / "run-log-scale-note.png"))


def test_each_chart_switches_to_log_scale_and_the_page_remembers_panels(page):
    run = make_run(
        page.user, status=Run.Status.COMPLETED, step=30, total_steps=30, latest_metrics={"custom/loss": 1.0}
    )
    MetricPoint.upsert(
        run.pk,
        [(s, "actor/entropy", 1 + (s * 37) % 1000) for s in range(30)]
        + [(s, "custom/loss", 1.0 / (s + 1)) for s in range(30)],
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_function("document.querySelector('#chart-entropy .scatterlayer .trace') !== null")
    assert "500" in drawn(page, "entropy")["yticks"]  # linear: 0, 500, 1000
    page.get_by_label("Log scale for Entropy").check()
    wait_for(
        lambda: {"10", "100"} <= set(drawn(page, "entropy")["yticks"]),  # log: 1, 2, 5, 10, 20 ...
        timeout=10,
        message="log ticks",
    )
    assert page.get_by_label("Log scale for Gradient norm").is_checked()  # its own default, untouched
    page.locator("#section-logged > summary").click()
    assert not page.locator("#chart-logged-0").is_visible()

    page.reload()
    page.wait_for_function("document.querySelector('#chart-entropy .scatterlayer .trace') !== null")
    assert page.get_by_label("Log scale for Entropy").is_checked()
    assert {"10", "100"} <= set(drawn(page, "entropy")["yticks"])
    assert not page.locator("#chart-logged-0").is_visible()
    page.locator("#section-logged > summary").click()
    # Plotly merges nearly collinear vertices of the flat tail: at least a line across the whole chart.
    wait_for(
        lambda: drawn(page, "logged-0")["lines"][:1] >= [10], timeout=10, message="the unfolded custom chart"
    )
    assert max(float(t) for t in drawn(page, "logged-0")["xticks"]) >= 25
    assert page.locator("#chart-logged-0 .gtitle").text_content() == "custom/loss"
    page.screenshot(path=str(ARTIFACTS / "run-panels.png"), full_page=True)


def test_every_logged_key_is_charted_and_a_key_logged_live_gets_its_chart(page):
    """A run trained elsewhere (any key names): a key first logged while its page is open gets a chart."""
    # veRL logs over 100 keys: the page asks for them 100 at a time, in natural order (col2 before col10).
    keys = [f"col{i}" for i in range(130)]
    experiment = make_experiment(page.user, "streamed", imported=True)
    run = make_run(page.user, experiment=experiment, status=Run.Status.RUNNING, step=3, total_steps=10)
    write_points(run.pk, [(s, key, s + i / 1000) for s in range(3) for i, key in enumerate(keys)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    section = page.locator("#section-logged > summary")
    assert section.inner_text().strip() == "Other logged keys (130)"
    assert page.locator("#chart-logged-2 .gtitle").text_content() == "col2"
    # Over 40 charts: each is drawn when it comes near the window (1,500 drawn at once froze the tab)
    assert page.locator("#chart-logged-129 svg").count() == 0
    assert page.locator("#chart-logged-129").bounding_box()["height"] == 280  # its place held: no jumps
    page.locator("#chart-logged-129").scroll_into_view_if_needed()
    wait_for(lambda: drawn(page, "logged-129")["lines"], timeout=15, message="the 130th key's chart drawn")
    assert page.locator("#chart-logged-129 .gtitle").text_content() == "col129"

    write_points(run.pk, [(3, "late/key", 0.5), (4, "late/key", 0.25)])
    page.locator("text=late/key").first.wait_for(timeout=15_000)  # the page reloaded with its chart
    assert page.locator("#section-logged > summary").inner_text().strip() == "Other logged keys (131)"


def test_long_key_names_are_asked_for_in_requests_any_server_accepts(page):
    """gunicorn refuses a request line beyond 4,094 bytes (the tests' server takes 64k): 50 keys of 95
    characters are asked for in several requests, each within the page's budget, and all are drawn."""
    keys = [f"timing_per_token_ms/{'update_actor_' * 5}{i}" for i in range(50)]
    run = make_run(page.user, status=Run.Status.COMPLETED, step=3, total_steps=3)
    run.latest_metrics = dict.fromkeys(keys, 0.5)
    run.save()
    MetricPoint.upsert(run.pk, [(s, key, (0.2, 0.9, 0.4)[s]) for s in range(3) for key in keys])
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/metrics?" in request.url else None)
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.locator("#section-logged > summary").click()  # a run trained here folds over 12 other keys
    page.locator("#chart-logged-49").scroll_into_view_if_needed()
    wait_for(lambda: drawn(page, "logged-49")["lines"] == [3], timeout=15, message="the 50th key drawn")
    page.locator("#chart-logged-0").scroll_into_view_if_needed()  # over 40 charts: drawn as they come near
    wait_for(lambda: drawn(page, "logged-0")["lines"] == [3], timeout=15, message="the first key drawn")
    assert len(asked) >= 2 and max(map(len, asked)) <= 3500, [len(url) for url in asked]


def test_a_key_that_looks_like_markup_is_drawn_as_written(page):
    key = "<b>bold</b> & <br>"
    run = make_run(page.user, status=Run.Status.COMPLETED, step=3, total_steps=3)
    run.latest_metrics = {key: 0.4}
    run.save()
    MetricPoint.upsert(run.pk, [(s, key, (0.2, 0.9, 0.4)[s]) for s in range(3)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: drawn(page, "logged-0")["lines"] == [3], timeout=15, message="the key's chart drawn")
    assert drawn(page, "logged-0")["texts"] == [key]  # its title, not a bold "bold" and a line break
    assert drawn(page, "logged-0")["legend"] == [key]
    assert page.get_by_role("figure", name=f"Chart: {key} ({key})", exact=True).count() == 1  # its label too


def test_many_other_keys_of_a_native_run_start_folded_and_a_choice_to_open_them_is_kept(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, step=20, total_steps=20)
    keys = [f"perf/extra_{i}" for i in range(15)]
    run.latest_metrics = dict.fromkeys(["train/success", *keys], 0.5)
    run.save()
    zigzag = {s: (s * s % 7) / 7 for s in range(20)}
    MetricPoint.upsert(run.pk, [(s, key, zigzag[s]) for s in range(20) for key in ["train/success", *keys]])
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: drawn(page, "success")["lines"] == [20], timeout=15, message="the success chart")
    # The standard charts are the page's view; fifteen more of a run trained here wait behind their title
    assert page.locator("#section-logged > summary").inner_text().strip() == "Other logged keys (15)"
    assert not page.locator("#chart-logged-0").is_visible()
    page.locator("#section-logged > summary").click()
    wait_for(lambda: drawn(page, "logged-0")["lines"] == [20], timeout=10, message="the unfolded chart drawn")
    page.reload()
    wait_for(lambda: drawn(page, "logged-0")["lines"] == [20], timeout=15, message="kept open after a reload")
    assert page.locator("#chart-logged-0").is_visible()


def test_on_a_phone_each_detector_event_is_a_card_with_its_message_in_view(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, step=30, total_steps=30)
    MetricPoint.upsert(run.pk, [(s, "train/success", 0.5) for s in range(30)])
    DetectorEvent.objects.create(
        run=run,
        step=20,
        level="warning",
        rule="reward_std_drop",
        message="In-group reward std dropped: " + "x " * 60,
    )
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{page.base}/runs/{run.pk}/")
    message = page.locator("#event-list tbody td[data-label=Message]")
    message.wait_for()
    box = message.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390  # it sat past the screen's right edge


def test_an_open_page_follows_its_run_from_the_queue_and_shows_alert_emails_as_they_come(page):
    from django.utils import timezone

    from tests.factories import make_event
    from webapp.alerts.models import Notification

    run = make_run(page.user, total_steps=40)
    page.goto(f"{page.base}/runs/{run.pk}/")
    assert "is queued: stop it first" in page.locator("#delete-refusal").inner_text()
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, host="gpu-3", attempt=1, started_at=now, heartbeat_at=now, step=2
    )
    # It started: the page is drawn again once, its header saying so (it said "queued" and "Started –").
    page.locator("#delete-refusal").get_by_text("is running: stop it first").wait_for(timeout=15_000)
    assert page.locator("dt:has-text('Started') + dd").inner_text() != "–"
    assert not page.locator("#alert-delivery").count()
    assert not page.locator("#run-collapse").is_visible()  # no collapse: no red mark beside the status
    page.evaluate("window.sameDocument = true")  # gone if the page were loaded again
    event = make_event(run, 5, "collapse", rule="collapse", message="Success collapsed: a test")
    notification = Notification.objects.create(run=event.run, event=event, recipients=["me@example.com"])
    notification.claim()
    notification.mark_failed("SMTPServerDisconnected: Connection unexpectedly closed")
    # An email failing while the run trains shows on the open page, without a reload.
    page.locator("#alert-delivery").get_by_text("retrying until it is sent").wait_for(timeout=15_000)
    assert "SMTPServerDisconnected" in page.locator("#alert-delivery").inner_text()
    # and the collapse beside the run's status, linking to its step
    collapsed = page.locator("#run-collapse")
    collapsed.get_by_text("collapsed at step 5").wait_for(timeout=15_000)
    assert collapsed.get_attribute("href") == "?step=5"
    assert collapsed.bounding_box()["y"] - page.locator("#run-status").bounding_box()["y"] < 10  # beside it
    assert page.evaluate("window.sameDocument === true")


def test_a_log_axis_across_decades_labels_every_tick_with_its_whole_value(page):
    """Plotly labelled the ticks between powers of ten with a bare digit ("2, 1, 9 8 7 ... 2" for a gradient
    norm from 0.4 to 20): a tester read 0.4 as 4."""
    run = make_run(page.user, status=Run.Status.COMPLETED, step=4, total_steps=4)
    write_points(run.pk, [(s, "actor/grad_norm", value) for s, value in enumerate([0.4, 2.0, 20.0, 0.9])])
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: drawn(page, "grad_norm")["yticks"], timeout=15, message="the gradient norm's axis")
    ticks = drawn(page, "grad_norm")["yticks"]
    assert page.evaluate("document.getElementById('chart-grad_norm').layout.yaxis.type") == "log"
    assert "0.5" in ticks and "10" in ticks and "5" in ticks, ticks
    assert len(ticks) == len(set(ticks)), ticks  # no digit twice, once for each decade


def test_a_constant_value_is_drawn_on_a_scale_around_it(page):
    """Plotly fits a lone value with 1 either side: a learning rate of 1e-6 lay on the floor of a 0..1 axis."""
    run = streamed_run(page.user, step=5)
    write_points(run.pk, [(s, "optim/lr", 1e-6) for s in range(5)] + [(s, "loss", 2.0) for s in range(5)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: drawn(page, "logged-1")["lines"], timeout=15, message="the lr drawn")
    ticks = drawn(page, "logged-1")["yticks"]
    assert "1μ" in ticks and all(tick.endswith("μ") for tick in ticks), ticks  # Plotly's SI prefix: 1e-6
    assert drawn(page, "logged-0")["yticks"][0] == "1"  # a constant 2: half of it either side


def test_a_constant_fraction_is_drawn_on_the_fractions_axis(page):
    """Every group with zero std at every step: the axis ran from 0.5 to 1.5, past what a fraction can be."""
    run = make_run(page.user, status=Run.Status.COMPLETED, step=5, total_steps=5)
    write_points(run.pk, [(s, "train/frac_zero_std_groups", 1.0) for s in range(5)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: drawn(page, "zero_std")["lines"], timeout=15, message="the zero-std fraction drawn")
    ticks = [float(tick) for tick in drawn(page, "zero_std")["yticks"]]
    assert ticks[0] == 0 and ticks[-1] == 1, ticks


def test_a_run_that_ended_before_its_first_step_says_it_logged_nothing(page):
    # It listed every chart as "not logged by this run", as if the run had logged other things.
    run = make_run(page.user, status=Run.Status.STOPPED, step=0, total_steps=60)
    page.goto(f"{page.base}/runs/{run.pk}/")
    note = page.locator("#not-logged")
    expect(note).to_have_text("This run logged no metrics before it ended, so there are no charts.")


def test_a_keyboard_zooms_every_chart_by_typing_the_steps_and_goes_back_to_the_whole_run(page):
    # A zoom was a drag on a chart: with Plotly's toolbar out of the tab order, a keyboard had none.
    run = make_run(page.user, status=Run.Status.COMPLETED, step=100, total_steps=100)
    MetricPoint.upsert(
        run.pk, [(s, key, s / 100) for s in range(100) for key in ("train/success", "actor/entropy")]
    )
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: drawn(page, "success")["xticks"], timeout=10, message="the success chart")
    whole = drawn(page, "success")["xticks"]
    assert page.get_by_role("button", name="Whole run").is_hidden()  # nothing to go back to

    page.get_by_label("Show steps from").fill("60")
    page.keyboard.press("Enter")
    expect(page.locator("#range-error")).to_have_text("give both ends")
    assert page.get_by_label("Show steps from").get_attribute("aria-invalid") == "true"
    page.get_by_label("to", exact=True).fill("40")
    page.keyboard.press("Enter")
    expect(page.locator("#range-error")).to_have_text("the first end must be below the second")
    page.get_by_label("to", exact=True).fill("80")
    page.keyboard.press("Enter")
    for chart in ("success", "entropy"):
        wait_for(lambda: drawn(page, chart)["xticks"][0] == "60", timeout=10, message=f"{chart} zoomed")
    assert "xrange=60%2C80" in page.url or "xrange=60,80" in page.url
    assert page.locator("#range-error").inner_text() == ""

    page.get_by_role("button", name="Whole run").focus()
    page.keyboard.press("Enter")
    wait_for(lambda: drawn(page, "entropy")["xticks"] == whole, timeout=10, message="the whole run again")
    assert "xrange" not in page.url
    assert page.evaluate("document.activeElement.id") == "range-from"  # the button went with the zoom
    assert page.get_by_label("Show steps from").input_value() == ""


def test_the_reload_when_a_run_ends_keeps_its_tables_and_the_focus(page):
    # The page reloads once to show a run's new state: a reader's tables went and the focus fell to the top.
    run = make_run(page.user, status=Run.Status.RUNNING, step=5, total_steps=40)
    write_points(run.pk, [(s, "train/success", s / 10) for s in range(6)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    wait_for(lambda: drawn(page, "success")["markers"] == [6], timeout=15, message="6 points drawn")
    switch = page.get_by_label("Show Success (train and validation) as a table")
    switch.check()
    switch.focus()
    expect(page.locator("#table-success")).to_be_visible()

    with page.expect_navigation(timeout=15_000):
        Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED, step=6)
    expect(page.locator("#run-status")).to_have_text("Completed")
    expect(page.locator("#table-success")).to_be_visible()
    assert switch.is_checked()
    wait_for(
        lambda: (
            page.evaluate("document.activeElement.getAttribute('aria-label')")
            == switch.get_attribute("aria-label")
        ),
        timeout=10,
        message="the focus back on the table switch",
    )


def test_a_running_run_whose_worker_went_quiet_says_so_and_what_happens_next(page):
    # A worker killed outright left its run's page saying "running" with a frozen ETA for five minutes.
    from datetime import timedelta

    from django.utils import timezone

    quiet = make_run(
        page.user, status=Run.Status.RUNNING, step=3, total_steps=40, host="gpu-7", attempt=1, eta_seconds=251
    )
    Run.objects.filter(pk=quiet.pk).update(heartbeat_at=timezone.now() - timedelta(minutes=3))
    page.goto(f"{page.base}/runs/{quiet.pk}/")
    expect(page.locator("#run-heartbeat")).to_contain_text(
        "ago; nothing since: if its worker is gone, the run is queued again after 5m 00s without a word"
    )
    expect(page.locator("#run-eta")).to_have_text("")  # no estimate from a worker that went quiet
    Run.objects.filter(pk=quiet.pk).update(heartbeat_at=timezone.now())  # it answers again
    expect(page.locator("#run-heartbeat")).not_to_contain_text("nothing since", timeout=10_000)


def test_a_log_axis_across_a_decade_labels_ticks_that_do_not_overlap(page):
    """TRL's gradient norm from 0.57 to 5.4 (a tiny GRPO run): Plotly ticked every digit between 0.5 and 6,
    and with whole values for labels "0.9", "0.8", "0.7", "0.6" and "0.5" were drawn over one another, at
    1280 px as at 390."""
    run = make_run(page.user, status=Run.Status.COMPLETED, step=8, total_steps=8)
    norms = [5.42, 1.14, 0.57, 3.3, 1.07, 1.21, 3.97, 0.94]
    write_points(run.pk, [(s + 1, "actor/grad_norm", value) for s, value in enumerate(norms)])
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{page.base}/runs/{run.pk}/")
        wait_for(lambda: drawn(page, "grad_norm")["yticks"], timeout=15, message="the gradient norm's axis")
        assert page.evaluate("document.getElementById('chart-grad_norm').layout.yaxis.type") == "log"
        boxes = page.evaluate(
            """() => Array.from(document.querySelectorAll('#chart-grad_norm .yaxislayer-above .ytick text'))
                .map((t) => { const b = t.getBoundingClientRect(); return [t.textContent, b.top, b.bottom]; })
                .sort((a, b) => a[1] - b[1])"""
        )
        labels = [label for label, _, _ in boxes]
        assert {"1", "5"} <= set(labels), labels
        for (above, _, bottom), (below, top, _) in zip(boxes, boxes[1:]):
            assert bottom <= top + 1, f"at {width} px {above!r} overlaps {below!r}: {labels}"
