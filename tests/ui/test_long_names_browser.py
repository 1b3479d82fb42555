"""Names are the user's text: a 200-character name without a space wraps inside its cell instead of pushing
the table's other columns off the screen, and a right-to-left override in a name stays inside the name."""

import pytest

from tests.factories import make_experiment, trained_run
from tests.helpers import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"
LONG = "sweep_" + "x" * 194
RTL = "\u5b9e\u9a8c \u202eRTL"  # "实验 ", then RIGHT-TO-LEFT OVERRIDE, never closed


def right_edge(page, selector) -> float:
    box = page.locator(selector).first.bounding_box()
    return box["x"] + box["width"]


@pytest.mark.parametrize("path, last_column", [("/", "Created"), ("/runs/", "Status")])
def test_a_long_name_wraps_and_every_column_stays_on_screen(page, path, last_column):
    page.set_viewport_size({"width": 1280, "height": 900})
    experiment = make_experiment(page.user, LONG)
    trained_run(experiment, "seed=1", step=3)
    page.goto(page.base + path)
    header = page.locator("table.data th", has_text=last_column).first
    header.wait_for()
    page.screenshot(path=str(ARTIFACTS / f"long-name{path.replace('/', '-')}.png"), full_page=False)
    assert right_edge(page, f"table.data th:has-text('{last_column}')") <= 1280
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0


def test_a_right_to_left_override_in_a_name_does_not_turn_the_text_after_it(page):
    experiment = make_experiment(page.user, RTL, preset="starpo-s")
    trained_run(experiment, "seed=1", step=3)
    page.goto(page.base + "/")
    cell = page.locator("table.data td", has_text="starpo-s").first
    cell.wait_for()
    page.screenshot(path=str(ARTIFACTS / "rtl-name-home.png"), full_page=False)
    # Drawn left to right, "starpo-s" starts at its "s" and ends at its last "s" whatever the direction;
    # what shows the order is where "-" falls: after "starpo" (6 letters in) unless the override leaked.
    preset = cell.locator("span.muted")
    letters = preset.evaluate(
        """span => { const range = document.createRange(); const text = span.firstChild;
             return Array.from(text.data, (_, i) => { range.setStart(text, i); range.setEnd(text, i + 1);
                                                       return range.getBoundingClientRect().x; }); }"""
    )
    assert letters == sorted(letters), "the preset's letters are drawn right to left"


def test_a_crowded_table_keeps_names_readable(page):
    """The compare page's runs table has a dozen columns: the run's name keeps a column wide enough for
    words (it once shrank to one letter a line, each row a screen tall)."""
    experiment = make_experiment(page.user, "crowded")
    runs = [trained_run(experiment, f"collapse-run-{seed} lr=3e-3", step=3) for seed in (1, 2)]
    page.set_viewport_size({"width": 1024, "height": 800})
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    name = page.get_by_role("link", name="collapse-run-1 lr=3e-3")
    name.wait_for()
    page.screenshot(path=str(ARTIFACTS / "long-name-compare-table.png"), full_page=False)
    assert name.bounding_box()["height"] < 45, "the name wraps over more than two lines"


def test_a_long_name_wraps_in_its_own_pages_title(page):
    """A tester's 150-letter name made the experiment page 3,919 px wide, its title on one line."""
    page.set_viewport_size({"width": 1280, "height": 900})
    experiment = make_experiment(page.user, LONG)
    run = trained_run(experiment, "seed=1", step=3)
    for path in (experiment.get_absolute_url(), run.get_absolute_url()):
        page.goto(page.base + path)
        page.locator("h1").first.wait_for()
        assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0, path


def test_a_long_run_name_wraps_in_the_compare_legend_and_config_diff(page):
    # A tester's 200-letter run name ran out of its legend entry and widened its config-diff column until the
    # other run's column was off the page.
    experiment = make_experiment(page.user, "long run names")
    runs = [
        trained_run(
            experiment, f"seed={seed}", overrides={"seed": seed}, step=3, name=LONG if seed == 1 else ""
        )
        for seed in (1, 2)
    ]
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    legend = page.locator("#run-legend")
    legend_right = legend.bounding_box()["x"] + legend.bounding_box()["width"]
    for entry in legend.locator(".legend-entry").all():
        assert entry.evaluate("e => e.scrollWidth <= e.clientWidth"), "its text runs out of the entry"
        assert entry.bounding_box()["x"] + entry.bounding_box()["width"] <= legend_right + 1
    other = page.locator("#config-diff thead th").nth(2)
    assert right_edge(page, "#config-diff thead th >> nth=2") <= 1280, other.inner_text()
