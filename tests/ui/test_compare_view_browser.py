"""The compare page keeps its view in the address too: a zoom on one chart zooms every chart, and the
zoom range and smoothing come back from a copied link."""

from urllib.parse import parse_qs, urlparse

import pytest

from tests.factories import make_experiment, points, trained_run
from tests.helpers import wait_for
from tests.ui.chart_helpers import drag_across, ticks

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_compare_zoom_is_shared_by_every_chart_and_kept_in_the_link(page):
    experiment = make_experiment(page.user, "pair")
    runs = [trained_run(experiment, f"seed={seed}", overrides={"seed": seed}, step=60) for seed in (1, 2)]
    for i, run in enumerate(runs):
        points(run, "train/success", {s: ((s * s + i) % 7) / 7 for s in range(60)})
        points(run, "actor/grad_norm", {s: 1 + ((s + i) % 5) for s in range(60)})
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert max(ticks(page, "success")) >= 50

    drag_across(page, "success")
    wait_for(lambda: max(ticks(page, "success")) < 45, timeout=10, message="the success chart zoomed")
    wait_for(
        lambda: ticks(page, "grad_norm") == ticks(page, "success"), timeout=10, message="grad norm follows"
    )
    low, high = (float(x) for x in parse_qs(urlparse(page.url).query)["xrange"][0].split(","))
    assert 5 < low < high < 45

    page.locator("#smoothing").fill("0.5")
    wait_for(lambda: "smooth=0.5" in page.url, timeout=5, message="smoothing in the URL")
    zoomed, shared = ticks(page, "success"), page.url
    page.goto(f"{page.base}/")
    page.goto(shared)
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    wait_for(lambda: ticks(page, "success") == zoomed, timeout=10, message="the zoom restored")
    assert ticks(page, "grad_norm") == zoomed
    assert page.locator("#smoothing-value").inner_text() == "0.5"
