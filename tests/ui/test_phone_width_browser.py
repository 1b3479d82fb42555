"""The main pages on a phone (390 px wide) in real chromium: the top bar's links fold behind a Menu button
that opens them in a column, and no page scrolls sideways (wide tables scroll inside themselves)."""

import pytest

from tests.factories import make_event, make_experiment, make_run, points, trained_run
from tests.helpers import REPO_ROOT
from webapp.accounts.models import ApiToken
from webapp.alerts.models import Notification
from webapp.experiments.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"
PHONE = {"width": 390, "height": 844}


def page_overflow(page) -> int:
    """How many CSS pixels the page is wider than the screen (0: no sideways scroll)."""
    return page.evaluate("document.documentElement.scrollWidth - window.innerWidth")


def test_main_pages_fit_a_phone_and_the_menu_opens_the_links(page):
    experiment = make_experiment(page.user, "a rather long experiment name for a phone screen")
    runs = [
        trained_run(experiment, f"seed={seed} lr=7e-4", overrides={"seed": seed}, step=40) for seed in (1, 2)
    ]
    for i, run in enumerate(runs):
        points(run, "train/success", {s: (s % 7) / 7 + i / 10 for s in range(40)})
    # The run page's alert emails table (long recipients) and its tags and notes, on a phone too
    experiment.set_alerts(
        [f"researcher.number.{i}@a-long-laboratory-domain.example.org" for i in range(3)], True
    )
    Notification.create_for([make_event(runs[0], 20, "collapse")])
    runs[0].tags, runs[0].notes = ["baseline", "paper-repro"], "A note long enough to wrap on a phone. " * 4
    runs[0].save()
    ApiToken.issue(page.user, "a-token-name-without-any-space-" * 3)
    page.set_viewport_size(PHONE)
    pages = {
        "experiments": "/",
        "experiment": f"/experiments/{experiment.pk}/",
        "run": f"/runs/{runs[0].pk}/",
        "runs-table": "/runs/",
        "compare": f"/compare?runs={runs[0].pk},{runs[1].pk}",
        "new-experiment": "/experiments/new/",
        "import": "/import",
        "trajectories": f"/runs/{runs[0].pk}/trajectories",
        "tokens": "/tokens/",
        "account": "/account/",
    }
    for name, path in pages.items():
        page.goto(page.base + path)
        if name in ("run", "compare"):
            page.wait_for_selector("#chart-success .scatterlayer .trace path.js-line")
            # No chart toolbar over the centred titles (a tap left it shown for good on a touch screen).
            assert page.locator("#chart-success .modebar-container .modebar").count() == 0, name
        nav_link = page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs", exact=True)
        menu = page.get_by_role("button", name="Menu")
        assert menu.is_visible() and not nav_link.is_visible(), name
        assert page_overflow(page) <= 0, name
        if name == "run":  # each alert email is a card: its delivery state on screen, not scrolled away
            delivery = page.locator("#alert-delivery td[data-label=Delivery]").bounding_box()
            assert delivery["x"] >= 0 and delivery["x"] + delivery["width"] <= PHONE["width"]
        if name == "tokens":  # each token is a card: its Revoke button on screen (it sat past the right edge)
            revoke = page.get_by_role("button", name="Revoke").bounding_box()
            assert revoke["x"] >= 0 and revoke["x"] + revoke["width"] <= PHONE["width"]
        page.screenshot(path=str(ARTIFACTS / f"phone-{name}.png"), full_page=True)

        menu.click()
        assert menu.get_attribute("aria-expanded") == "true"
        assert nav_link.is_visible()
        box = nav_link.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= PHONE["width"], name
        assert page.get_by_role("button", name="Log out").is_visible()
        assert page_overflow(page) <= 0, name
        if name == "experiments":
            page.screenshot(path=str(ARTIFACTS / "phone-menu-open.png"))
        page.keyboard.press("Escape")
        assert not nav_link.is_visible()

    # A wide screen shows the links in the bar, no Menu button.
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(page.base + "/")
    assert not page.get_by_role("button", name="Menu").is_visible()
    assert (
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Runs", exact=True).is_visible()
    )


def test_a_compare_page_with_an_imported_run_does_not_scroll_sideways_on_a_phone(page):
    """The config diff says "not in this run's config" to a screen reader in hidden text, placed against the
    page rather than the table's scroll box: an imported run (no config) beside runs trained here made the
    whole page hundreds of pixels wider than a phone."""
    trained = make_experiment(page.user, "lr sweep")
    runs = [
        trained_run(trained, f"seed={seed} lr=7e-4 warm", overrides={"seed": seed}, step=20)
        for seed in range(4)
    ]
    imported = make_experiment(page.user, "imported", imported=True)
    runs.append(
        make_run(
            page.user, experiment=imported, label="imported: a.csv", config={}, status=Run.Status.COMPLETED
        )
    )
    for run in runs:
        points(run, "train/success", {s: s / 40 for s in range(20)})
    page.set_viewport_size(PHONE)
    page.goto(f"{page.base}/compare?runs={','.join(str(run.pk) for run in runs)}")
    page.wait_for_selector("#chart-success .scatterlayer .trace path.js-line")
    assert page.locator("#config-diff").get_by_text("not in this run's config").count() > 0
    assert page_overflow(page) <= 0
