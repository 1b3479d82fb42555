"""The trajectory viewer in a real browser: a legend of the board's symbols, filters, readable labels."""

import pytest

from tests.factories import make_run
from tests.helpers import REPO_ROOT
from webapp.experiments.models import Run
from webapp.metrics.models import Sample

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "runs"


def turn(valid=True, think="the goal is down and right"):
    return {
        "state": "P___\n_O__\n____\n___G",
        "think": think,
        "answer": "Down",
        "actions": ["Down"],
        "reward": 0,
        "valid": valid,
    }


def test_legend_filters_and_labels_that_stand_apart(page):
    run = make_run(
        page.user, status=Run.Status.COMPLETED, config={"env": {"name": "frozenlake", "params": {"size": 4}}}
    )
    for index, (success, reward, valid) in enumerate(
        [(True, 1.0, True), (False, 0.0, False), (False, 0.5, True)]
    ):
        Sample.objects.create(
            run=run,
            step=4,
            index=index,
            data={"reward": reward, "success": success, "turns": [turn(), turn(valid)]},
        )
    page.goto(f"{page.base}/runs/{run.pk}/trajectories")
    legend = page.locator("#board-legend").inner_text()
    assert "P\nplayer" in legend and "O\nhole" in legend and "G\ngoal" in legend

    def shown():
        return [
            int(text.split()[1]) for text in page.locator("section.trajectory:visible h2").all_inner_texts()
        ]

    assert shown() == [0, 1, 2]
    page.select_option("#filter-outcome", "failure")
    assert shown() == [1, 2] and page.locator("#filter-count").inner_text() == "2 of 3 shown"
    page.fill("#filter-reward", "0.5")
    assert shown() == [2]
    page.fill("#filter-reward", "")
    page.select_option("#filter-format", "invalid")
    assert shown() == [1]
    page.select_option("#filter-outcome", "")
    page.select_option("#filter-format", "")
    assert shown() == [0, 1, 2]

    label = page.locator(".think .label").first.bounding_box()
    text = page.locator(".think .think-text").first.bounding_box()
    assert text["x"] >= label["x"] + label["width"] + 4  # "thinking" does not run into the text
    page.screenshot(path=str(ARTIFACTS / "trajectories.png"), full_page=True)


def test_an_endless_word_wraps_inside_its_sample(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, config={"env": {"name": "frozenlake"}})
    word = "verylongwordwithoutspaces" * 40
    Sample.objects.create(
        run=run, step=1, index=0, data={"reward": 0, "success": False, "turns": [turn(think=word)]}
    )
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{page.base}/runs/{run.pk}/trajectories")
    page.locator(".think-text").wait_for()
    assert page.evaluate("document.documentElement.scrollWidth - window.innerWidth") <= 0


def test_filters_outlive_a_step_change_and_a_reload(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, config={"env": {"name": "frozenlake"}})
    for step in (2, 4):
        for index, success in enumerate([True, False, False]):
            Sample.objects.create(
                run=run,
                step=step,
                index=index,
                data={"reward": float(success), "success": success, "turns": [turn()]},
            )
    page.goto(f"{page.base}/runs/{run.pk}/trajectories")
    page.select_option("#filter-outcome", "failure")
    page.fill("#filter-reward", "0")
    page.wait_for_url(lambda url: "outcome=failure" in url and "reward=0" in url)
    with page.expect_navigation():
        page.select_option("#step-select", "2")
    assert "step=2" in page.url
    assert page.locator("section.trajectory:visible").count() == 2
    assert page.locator("#filter-count").inner_text() == "2 of 3 shown"
    assert page.input_value("#filter-outcome") == "failure" and page.input_value("#filter-reward") == "0"
    page.reload()
    assert page.locator("section.trajectory:visible").count() == 2
    page.select_option("#filter-outcome", "")
    page.wait_for_url(lambda url: "outcome" not in url)
    assert page.locator("section.trajectory:visible").count() == 3


def test_a_bad_filter_in_a_link_is_named_until_the_filters_change(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, config={"env": {"name": "frozenlake"}})
    Sample.objects.create(run=run, step=1, index=0, data={"reward": 0, "success": False, "turns": [turn()]})
    page.goto(f"{page.base}/runs/{run.pk}/trajectories?reward=lots")
    assert (
        page.locator("#filter-errors").inner_text()
        == "reward: must be a number, like 0.5; that filter is off"
    )
    page.select_option("#filter-outcome", "success")
    page.wait_for_url(lambda url: "reward" not in url)
    assert page.locator("#filter-errors").count() == 0
    assert page.locator("#filter-count").inner_text() == "0 of 1 shown"


def test_back_shows_the_step_the_page_is_at_in_every_control(page):
    run = make_run(page.user, status=Run.Status.COMPLETED, config={"env": {"name": "frozenlake"}})
    for step in (2, 5):
        Sample.objects.create(
            run=run, step=step, index=0, data={"reward": 0, "success": False, "turns": [turn()]}
        )
    page.goto(f"{page.base}/runs/{run.pk}/trajectories?step=5")
    with page.expect_navigation():
        page.select_option("#step-select", "2")
    page.go_back()
    page.wait_for_url("**step=5")
    assert page.input_value("#step-select") == "5" and page.input_value("#step-slider") == "1"


def test_arrow_keys_on_the_step_slider_load_the_step_and_keep_the_focus_there(page):
    # Each arrow press reloaded the page and left the focus at its top: one Tab trip per step.
    run = make_run(page.user, status=Run.Status.COMPLETED, config={"env": {"name": "frozenlake"}})
    for step in (0, 10, 20, 30):
        Sample.objects.create(
            run=run, step=step, index=0, data={"reward": 0, "success": False, "turns": [turn()]}
        )
    page.goto(f"{page.base}/runs/{run.pk}/trajectories?step=10")
    slider = page.locator("#step-slider")
    assert slider.get_attribute("aria-valuetext") == "step 10"  # the step, not its place in the list (1)
    slider.focus()
    with page.expect_navigation():
        page.keyboard.press("ArrowRight")
        page.keyboard.press("ArrowRight")  # two presses in a row: one load, of the step they reach
    page.wait_for_url("**step=30")
    assert page.evaluate("document.activeElement.id") == "step-slider"
    assert slider.get_attribute("aria-valuetext") == "step 30"
    assert page.get_by_label("Step number").input_value() == "30"
