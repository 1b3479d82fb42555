"""Revoking an API token asks first, as Stop does: a revoked token cannot be brought back."""

import pytest

from tests.helpers import answer_next_dialog
from webapp.accounts.models import ApiToken

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_revoke_asks_first_then_revokes(page):
    ApiToken.issue(page.user, "ci-script")
    page.goto(f"{page.base}/tokens/")
    questions = answer_next_dialog(page, accept=False)
    page.get_by_role("button", name="Revoke ci-script").click()
    assert questions and questions[0].startswith("Revoke the token ci-script?")
    page.wait_for_timeout(500)
    assert ApiToken.objects.filter(user=page.user).count() == 1  # dismissed: nothing sent

    answer_next_dialog(page, accept=True)
    with page.expect_navigation():
        page.get_by_role("button", name="Revoke ci-script").click()
    assert ApiToken.objects.filter(user=page.user).count() == 0
    assert "Revoked token 'ci-script'" in page.locator(".messages").inner_text()
