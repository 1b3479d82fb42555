"""The run page in a real browser: charts draw, live polling appends without losing the user's zoom,
and stops when the run ends."""

import time

import pytest

from tests.helpers import wait_for
from tests.runs.conftest import insert_series, make_run
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint

pytestmark = [pytest.mark.browser, pytest.mark.slow]



def trace_steps(page, chart, trace=-1):
    return page.evaluate(f"(() => {{ const d = document.getElementById('chart-{chart}').data;"
                         f" const t = d[d.length + ({trace}) ] ; return t ? Array.from(t.x) : []; }})()")


def test_live_charts_keep_zoom_and_stop_polling_when_the_run_ends(page):
    run = make_run(page.user, status=Run.Status.RUNNING, step=3000, total_steps=4000)
    insert_series(run, "actor/grad_norm", 3000, "1 + sin(s)")
    MetricPoint.upsert(run.pk, [(1234, "actor/grad_norm", 500)])
    MetricPoint.upsert(run.pk, [(s, "train/success", s / 3000) for s in range(0, 3000, 10)])

    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_function("document.getElementById('chart-grad_norm').data !== undefined")
    grad = page.evaluate("document.getElementById('chart-grad_norm').data.map(t => [t.fill || '', t.y.length])")
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
    MetricPoint.upsert(run.pk, [(0, "train/success", 1.0), (1, "train/success", float("nan")),
                                (2, "train/success", 3.0)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    page.wait_for_function("document.getElementById('chart-success').data !== undefined")
    assert page.evaluate("EchoSmoothing.ema([1, null, 3], 0.5)") == [1, None, pytest.approx(7 / 3)]
    page.locator("#smoothing").fill("0.5")
    page.locator("#smoothing").dispatch_event("input")
    smoothed = page.evaluate("document.getElementById('chart-success').data.map(t => [t.name, Array.from(t.y)])")
    assert smoothed == [["train/success", [1, None, 3]],
                        ["train/success (smoothed)", [1, None, pytest.approx(7 / 3)]]]


def test_one_validation_chart_per_validation_environment(page, tmp_path):
    """rollout.val_envs adds a chart per environment, titled with its name, drawing val/<env>/success."""
    run = make_run(page.user, status=Run.Status.COMPLETED,
                   config={"model": {"name": "tiny"}, "env": {"name": "sokoban"},
                           "rollout": {"group_size": 4, "val_envs": ["frozenlake", "sokoban-alternate"]}})
    MetricPoint.upsert(run.pk, [(s, "val/frozenlake/success", s / 100) for s in range(0, 60, 10)])
    MetricPoint.upsert(run.pk, [(s, "val/success", 0.5) for s in range(0, 60, 10)])
    page.goto(f"{page.base}/runs/{run.pk}/")
    chart = page.locator("#chart-val_frozenlake")
    chart.locator("path.js-line").first.wait_for(timeout=15_000)
    assert chart.locator(".gtitle").text_content() == "Validation success on frozenlake"
    other = page.locator("#chart-val_sokoban-alternate")
    other.locator(".gtitle").wait_for(timeout=15_000)
    assert other.locator(".gtitle").text_content() == "Validation success on sokoban-alternate"
    assert other.locator("path.js-line").count() == 0  # no points yet: nothing drawn
    chart.screenshot(path=str(tmp_path / "val_chart.png"))
