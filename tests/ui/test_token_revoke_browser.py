"""Revoking an API token asks first, as Stop does: a revoked token cannot be brought back."""

import pytest
from playwright.sync_api import expect

from tests.helpers import answer_next_dialog
from webapp.accounts.models import ApiToken

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_revoke_asks_first_then_revokes(page):
    token, _ = ApiToken.issue(page.user, "ci-script")
    page.goto(f"{page.base}/tokens/")
    questions = answer_next_dialog(page, accept=False)
    page.get_by_role("button", name="Revoke ci-script").click()
    assert questions and questions[0].startswith(f"Revoke the token ci-script (starts with {token.hint}…)?")
    page.wait_for_timeout(500)
    assert ApiToken.objects.filter(user=page.user).count() == 1  # dismissed: nothing sent

    answer_next_dialog(page, accept=True)
    with page.expect_navigation():
        page.get_by_role("button", name="Revoke ci-script").click()
    assert ApiToken.objects.filter(user=page.user).count() == 0
    assert "Revoked token 'ci-script'" in page.locator(".messages").inner_text()


def test_a_new_token_is_copied_with_one_button(page):
    # Shown only once: a Copy button, not a select-and-copy inside a scrolling box on a phone.
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.goto(f"{page.base}/tokens/")
    page.get_by_label("Name").fill("laptop")
    with page.expect_navigation():
        page.get_by_role("button", name="Create token").click()
    shown = page.locator("#new-token-value").inner_text().strip()
    copy = page.locator("button[data-copy=new-token-value]")
    assert copy.inner_text() == "Copy token"
    copy.click()
    expect(copy).to_have_text("Copied")
    assert page.evaluate("navigator.clipboard.readText()") == shown
    assert ApiToken.authenticate(shown) is not None
