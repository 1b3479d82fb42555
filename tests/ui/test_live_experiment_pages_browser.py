"""Experiment pages move while runs train, in chromium: statuses and progress update without a reload, the
compare ticks survive the refresh, and the page stops asking once every run has finished."""

import pytest
from playwright.sync_api import expect

from tests.factories import spec_experiment
from tests.helpers import REPO_ROOT
from webapp.experiments.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"


def test_the_runs_table_follows_a_run_from_queued_to_completed(page):
    experiment = spec_experiment(page.user, seeds=[1, 2], steps=10)
    first, second = experiment.runs.order_by("id")
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    row = page.locator("table.runs tbody tr").first
    assert "Queued" in row.inner_text() and "0 / 10" in row.inner_text()
    page.locator(f"input.compare-select[value='{second.pk}']").check()

    Run.objects.filter(pk=first.pk).update(status="running", step=6, host="gpu-7")
    assert page.locator("#stop-all-form").is_visible()
    page.get_by_text("6 / 10").wait_for(timeout=15_000)
    assert "Running" in row.inner_text() and "gpu-7" in row.inner_text()
    assert sorted(page.locator(".badges .badge").all_inner_texts()) == ["1 queued", "1 running"]
    assert page.locator(f"input.compare-select[value='{second.pk}']").is_checked()  # the tick survived
    assert page.locator("#compare-count").inner_text() == "1 run selected"
    focused = "document.activeElement.matches('input.compare-select') && document.activeElement.value"
    assert page.evaluate(focused) == str(second.pk)  # and so did the keyboard focus
    page.screenshot(path=str(ARTIFACTS / "experiment-live-runs.png"))

    Run.objects.filter(pk__in=[first.pk, second.pk]).update(status="completed", step=10)
    page.locator(".badges").get_by_text("2 completed").wait_for(timeout=15_000)
    assert page.locator("#experiment-runs[data-live]").count() == 0  # nothing left to follow
    assert page.locator("#stop-all-form").count() == 0  # nothing left to stop: the button went with them

    asked = []
    page.on("request", lambda request: "part=runs" in request.url and asked.append(request.url))
    page.wait_for_timeout(6_000)
    assert asked == []


def test_delete_is_off_saying_why_while_runs_train_and_on_once_they_have_ended(page):
    experiment = spec_experiment(page.user, seeds=[1, 2], steps=10)
    first, second = experiment.runs.order_by("id")
    Run.objects.filter(pk=first.pk).update(status="running", step=3, host="gpu-7")
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    delete = page.locator("#delete-experiment-form button")
    assert delete.is_disabled()
    note = page.locator("#delete-refusal").inner_text()
    assert note.startswith(
        f"Delete is off: experiment {experiment.pk} has 2 runs not finished (run {first.pk} running, "
        f"run {second.pk} queued): stop them first"
    )
    # beside the button it explains, not down by the runs
    below = page.locator("#delete-refusal").bounding_box()["y"] - delete.bounding_box()["y"]
    assert 0 < below < 80
    page.screenshot(path=str(ARTIFACTS / "experiment-delete-off.png"))

    Run.objects.filter(pk__in=[first.pk, second.pk]).update(status="stopped")
    page.locator(".badges").get_by_text("2 stopped").wait_for(timeout=15_000)
    assert page.locator("#delete-refusal").is_hidden() and delete.is_enabled()  # no reload needed


def test_the_experiment_list_follows_progress(page):
    experiment = spec_experiment(page.user, seeds=[1], steps=10)
    page.goto(f"{page.base}/")
    row = page.locator("table.experiments tbody tr").first
    assert "1 queued" in row.inner_text()
    Run.objects.filter(experiment=experiment).update(status="running", step=5)
    row.get_by_text("1 running").wait_for(timeout=15_000)
    assert "50%" in row.inner_text()


def test_on_a_phone_each_run_is_a_card_and_a_signed_out_page_says_so(page):
    experiment = spec_experiment(page.user, seeds=[1], steps=10)
    run = experiment.runs.get()
    Run.objects.filter(pk=run.pk).update(status="running", step=2)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    success = page.locator("table.runs td[data-label='Train success']")
    box = success.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 390  # it sat off-screen in a scrolled table

    page.context.clear_cookies()  # signed out, say in another tab
    page.get_by_text("You were signed out, so this table stopped updating").wait_for(timeout=15_000)
    assert page.locator("#experiment-runs[data-live]").count() == 0
    assert "2 / 10" in page.locator("table.runs").inner_text()  # the last state stays, marked as such


def test_an_experiment_deleted_elsewhere_stops_the_refresh_and_says_so(page):
    experiment = spec_experiment(page.user, seeds=[1], steps=10)
    Run.objects.filter(experiment=experiment).update(status="running", step=3)
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    experiment.delete()  # in another tab, say
    page.get_by_text("This table stopped updating (404): reload the page.").wait_for(timeout=15_000)
    assert page.locator("#experiment-runs[data-live]").count() == 0


def test_a_refused_alert_settings_form_keeps_the_runs_table_live(page):
    experiment = spec_experiment(page.user, seeds=[1], steps=10)
    run = experiment.runs.get()
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    page.get_by_text("Alert settings", exact=True).click()
    page.get_by_label("Alert recipients").fill("oops")
    page.get_by_role("button", name="Save alert settings").click()
    page.get_by_text("'oops' is not a valid email address").wait_for()  # shown at .../alerts/
    Run.objects.filter(pk=run.pk).update(status="running", step=4)
    page.get_by_text("4 / 10").wait_for(timeout=15_000)


WATCH_FOCUS = """() => {
  window.focusedAtStart = document.activeElement;
  window.focusLeft = 0;
  document.activeElement.addEventListener("blur", () => { window.focusLeft += 1; });
}"""
SAME_FOCUS = "() => [document.activeElement === window.focusedAtStart, window.focusLeft]"


def test_a_refresh_leaves_the_focused_control_alone_even_when_a_row_comes_in_above(page):
    # A screen reader announced the focused control at every refresh (the part was replaced and the copy
    # focused), every 5 s, and lost its reading place: now the part is merged in, the focus never moves.
    experiment = spec_experiment(page.user, name="Older", seeds=[1, 2], steps=10)
    first, second = experiment.runs.order_by("id")
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    page.locator(f"input.compare-select[value='{second.pk}']").focus()
    page.evaluate(WATCH_FOCUS)
    Run.objects.filter(pk=first.pk).update(status="running", step=6, host="gpu-7")
    page.get_by_text("6 / 10").wait_for(timeout=15_000)
    assert page.evaluate(SAME_FOCUS) == [True, 0]

    page.goto(f"{page.base}/")
    page.get_by_role("link", name="Older").focus()
    page.evaluate(WATCH_FOCUS)
    spec_experiment(page.user, name="Newer", seeds=[1], steps=10)  # listed first, above the focused row
    page.get_by_role("link", name="Newer").wait_for(timeout=15_000)
    assert page.locator("#experiment-table tbody tr").first.inner_text().startswith("Newer")
    assert page.evaluate(SAME_FOCUS) == [True, 0]
    assert page.evaluate("document.activeElement.textContent") == "Older"


def test_a_focused_stop_all_that_goes_with_the_last_running_run_does_not_become_resume(page):
    # The merge matched the page's forms by place: the focused "Stop all" turned into "Resume stopped
    # runs", keeping the focus, and Enter would have resumed them without a question (a reviewer's).
    experiment = spec_experiment(page.user, seeds=[1, 2], steps=10)
    first, second = experiment.runs.order_by("id")
    Run.objects.filter(pk=first.pk).update(status="running", step=3, host="gpu-7")
    Run.objects.filter(pk=second.pk).update(status="stopped", step=2)
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    page.locator("#stop-all-form button").focus()
    Run.objects.filter(pk=first.pk).update(status="completed", step=10)
    expect(page.locator("#stop-all-form")).to_have_count(0, timeout=15_000)
    assert page.evaluate("document.activeElement.closest('#resume-all-form') === null")
