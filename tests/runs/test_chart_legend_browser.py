"""A run page's chart legends sit under the x axis title, on a narrow window too, where the detector's view
adds long entries that wrap (they were drawn over the title "step")."""

from pathlib import Path

import pytest

from diagnostics import load_series
from tests.drawn_charts import drawn
from tests.helpers import REPO_ROOT, wait_for
from webapp.imports.importer import create_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "runs"
DATA = Path(__file__).resolve().parents[1] / "data" / "detector"


@pytest.mark.parametrize("width", [700, 1024])
def test_the_legend_does_not_cover_the_axis_title(page, width):
    series = load_series(DATA / "frozenlake-ppo-s2.csv")
    run = create_run(page.user, "FrozenLake PPO", "frozenlake-ppo-s2.csv", series)
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{page.base}/runs/{run.pk}/?detector=1")
    wait_for(
        lambda: "detector: entropy_rise (smoothing 0.6)" in drawn(page, "entropy")["legend"],
        timeout=15,
        message="the detector's series in the entropy chart's legend",
    )
    page.locator("#chart-entropy").screenshot(path=str(ARTIFACTS / f"chart-legend-{width}.png"))
    for chart in ("success", "entropy"):
        title = page.locator(f"#chart-{chart} .xtitle").bounding_box()
        legend = page.locator(f"#chart-{chart} .legend").bounding_box()
        assert legend["y"] >= title["y"] + title["height"], chart
