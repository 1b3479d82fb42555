"""The new-experiment page after a refused submit: the user lands on the first field in error, also when
it is the config import's, far below the top of the page."""

import pytest

from tests.helpers import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"


def in_view_and_focused(page, selector) -> bool:
    return page.evaluate(
        """(selector) => {
            const element = document.querySelector(selector), box = element.getBoundingClientRect();
            return document.activeElement === element && box.top >= 0 && box.bottom <= window.innerHeight;
        }""",
        selector,
    )


def test_a_refused_import_and_a_refused_form_show_their_first_error(page):
    page.set_viewport_size({"width": 1400, "height": 800})
    page.goto(f"{page.base}/experiments/new/")
    page.locator("section.import textarea").fill("env: [unclosed\n")
    with page.expect_navigation():
        page.get_by_role("button", name="Import", exact=True).click()
    assert in_view_and_focused(page, "section.import textarea")
    assert page.locator("section.import .errorlist").first.is_visible()
    page.screenshot(path=str(ARTIFACTS / "import-config-error.png"))

    page.goto(f"{page.base}/experiments/new/")
    page.get_by_label("Steps:", exact=True).fill("-1")
    with page.expect_navigation():
        page.get_by_role("button", name="Create experiment").click()
    assert in_view_and_focused(page, "#experiment-form [aria-invalid='true']")


def test_importing_a_config_keeps_what_was_typed(page):
    page.goto(f"{page.base}/experiments/new/")
    page.locator("#id_name").fill("typed name to keep")
    page.locator("section.import textarea").fill("algorithm: [oops\n")
    page.get_by_role("button", name="Import", exact=True).click()
    page.locator("section.import .errorlist").first.wait_for()
    assert page.locator("#id_name").input_value() == "typed name to keep"

    page.locator("section.import textarea").fill("algorithm: {filter_ratio: 0.5}\n")
    page.get_by_role("button", name="Import", exact=True).click()
    page.get_by_text("Config imported: check the fields").wait_for()
    assert page.locator("#id_name").input_value() == "typed name to keep"
    assert "filter_ratio: 0.5" in page.locator("#id_overrides").input_value()
