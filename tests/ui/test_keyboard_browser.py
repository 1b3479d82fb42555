"""Keyboard use: the first Tab stop skips the top bar's links to the page itself."""

import pytest

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_the_first_tab_offers_to_skip_to_the_content(page):
    page.goto(f"{page.base}/experiments/new/")
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    assert skip.evaluate("element => element === document.activeElement")
    box = skip.bounding_box()
    assert box is not None and box["y"] >= 0  # shown while focused (it sits above the page otherwise)
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    focused = page.evaluate("document.activeElement.closest('main') !== null")
    assert focused  # the next Tab stop is inside the page, past the navigation
