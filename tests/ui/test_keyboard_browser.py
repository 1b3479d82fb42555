"""Keyboard and screen-reader use: the first Tab stop skips the top bar's links to the page itself; a
refused form takes the focus to what is wrong and says so in the title; a popover closes when tabbed
past; every column has a name."""

import pytest
from playwright.sync_api import expect

from tests.factories import table_run
from webapp.accounts.models import ApiToken

pytestmark = [pytest.mark.browser, pytest.mark.slow]
FOCUSED_TEXT = "document.activeElement.textContent.trim()"


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


def test_a_wrong_password_takes_the_focus_to_its_message_and_the_title_says_error(page):
    page.context.clear_cookies()
    page.goto(f"{page.base}/accounts/login/")
    page.get_by_label("Username").fill(page.user.username)
    page.get_by_label("Password").fill("not-the-password")
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_title("Error: Log in · EchoLab")
    # autofocus on the username read that field, not the refusal, which was on the page as it loaded
    assert page.evaluate(FOCUSED_TEXT).startswith("Please enter a correct username and password")


def test_a_refused_ablation_focuses_its_choices_described_by_the_error(page):
    page.goto(f"{page.base}/compare/ablations")
    page.get_by_role("button", name="Create and compare").click()
    expect(page).to_have_title("Error: Paper ablations · EchoLab")
    focused = page.evaluate(
        "[document.activeElement.name, document.activeElement.getAttribute('aria-invalid')]"
    )
    assert focused == ["ablation", "true"]  # the first field in error, not Seeds below it
    described = page.evaluate(
        "document.activeElement.getAttribute('aria-describedby').split(' ')"
        ".map(id => document.getElementById(id).textContent.trim())"
    )
    assert described[1] == "This field is required."


def test_the_column_chooser_closes_when_tabbed_past_and_the_actions_column_has_a_name(page):
    table_run(page.user, label="only")
    page.goto(f"{page.base}/runs/")
    page.get_by_text("Columns", exact=True).click()
    page.get_by_role("button", name="Add column").focus()
    page.keyboard.press("Tab")  # on to the export link: the chooser covered the focused header below it
    expect(page.get_by_label("A config value as a column")).to_be_hidden()
    ApiToken.issue(page.user, "ci")
    page.goto(f"{page.base}/tokens/")
    assert page.locator("thead th").last.text_content() == "Actions"  # read out, not shown
