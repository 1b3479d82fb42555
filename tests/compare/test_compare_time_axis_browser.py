"""Compare page against training time, in a real browser: each run drawn over the minutes its own
seconds per step add up to, a run without them left out with a note, grouping waiting meanwhile."""

import pytest

from tests.drawn_charts import drawn, last_tick, write_points
from tests.factories import make_experiment, trained_run

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def chart_title(page) -> str:
    return page.locator("#chart-success .g-xtitle").text_content()


def test_runs_are_drawn_over_their_own_training_time_and_grouping_waits(page):
    experiment = make_experiment(page.user, "step times")
    fast, slow, clockless = (
        trained_run(experiment, f"lr={lr}", overrides={"optim.actor_lr": lr}, step=21)
        for lr in (1e-3, 1e-4, 1e-5)
    )
    for run, seconds in ((fast, 6.0), (slow, 12.0), (clockless, None)):
        clock = [] if seconds is None else [(s, "time/step_s", seconds) for s in range(21)]
        write_points(run.pk, [(s, "train/success", s / 20) for s in range(21)] + clock)
    page.goto(f"{page.base}/compare?runs={fast.pk},{slow.pk},{clockless.pk}&group=optim.actor_lr")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert chart_title(page) == "step" and 19 <= last_tick(page, "success") <= 21

    page.select_option("#x-axis", "time")
    page.locator("#chart-success .g-xtitle").get_by_text("training time").wait_for(timeout=15_000)
    # 21 steps of 12 s: 4.2 minutes at most (the fast run's 6 s steps end at 2.1)
    assert 3.5 <= last_tick(page, "success") <= 4.5, drawn(page, "success")["xticks"]
    assert page.locator("#align-note").inner_text() == (
        f"Against training time; left out, with no seconds per step logged: #{clockless.pk} lr=1e-05."
    )
    assert "Grouping is off against training time" in page.locator("#exclusive-note").inner_text()
    assert page.locator("#draw-count").inner_text() == (
        "Drawing 2 of 3 runs (ticked but 1 with no seconds per step logged)."
    )
    assert page.locator("#group-by").input_value() == ""
    assert "x=time" in page.url and "group=optim.actor_lr" in page.url  # the grouping waits in the address

    page.reload()  # the address draws the same
    page.locator("#chart-success .g-xtitle").get_by_text("training time").wait_for(timeout=15_000)
    assert page.locator("#x-axis").input_value() == "time" and 3.5 <= last_tick(page, "success") <= 4.5

    page.select_option("#x-axis", "step")  # steps again: the grouping comes back
    page.locator("#chart-success .g-xtitle").get_by_text("step", exact=True).wait_for(timeout=15_000)
    assert page.locator("#group-by").input_value() == "optim.actor_lr"
    assert page.locator("#align-note").is_hidden()

    page.select_option("#x-axis", "time")
    page.locator("#chart-success .g-xtitle").get_by_text("training time").wait_for(timeout=15_000)
    page.select_option(
        "#group-by", "optim.actor_lr"
    )  # grouping asked for: the axis goes back to steps, saying so
    page.locator("#chart-success .g-xtitle").get_by_text("step", exact=True).wait_for(timeout=15_000)
    assert page.locator("#x-axis").input_value() == "step"
    assert "The x axis is the step while runs are grouped" in page.locator("#exclusive-note").inner_text()


def test_grouping_aligned_runs_lets_their_zoom_from_onset_go(page):
    """A zoom of -20..10 steps from each run's collapse stayed as steps -20..10 once runs were grouped."""
    from tests.factories import make_event

    experiment = make_experiment(page.user, "lr pair")
    runs = [
        trained_run(
            experiment, f"lr={lr} seed={seed}", overrides={"optim.actor_lr": lr, "seed": seed}, step=60
        )
        for lr in (1e-3, 1e-4)
        for seed in (1, 2)
    ]
    for i, run in enumerate(runs):
        write_points(run.pk, [(s, "train/success", 0.5) for s in range(60)])
        make_event(run, 30 + i, "collapse", rule="collapse")
    ids = ",".join(str(run.pk) for run in runs)
    page.goto(f"{page.base}/compare?runs={ids}&group=&align=1&xrange=-20,10")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert chart_title(page) == "steps from the run's first collapse" and last_tick(page, "success") <= 10
    page.select_option("#group-by", "optim.actor_lr")
    page.locator("#chart-success .g-xtitle").get_by_text("step", exact=True).wait_for(timeout=15_000)
    page.wait_for_function("document.querySelectorAll('#group-table tbody tr').length === 2")
    assert "xrange" not in page.url and "align" not in page.url
    assert last_tick(page, "success") >= 50  # every step again, not steps -20..10

    # Against time, the grouping waits; ticking Align takes the axis back to steps from onset, still one
    # line per run; unticking it, lines by step and the grouping again.
    page.select_option("#x-axis", "time")
    page.locator("#exclusive-note").get_by_text("Grouping is off against training time").wait_for()
    page.check("#align-onset")
    page.locator("#chart-success .g-xtitle").get_by_text("steps from the run's first collapse").wait_for()
    assert page.locator("#x-axis").input_value() == "step" and page.locator("#group-by").input_value() == ""
    assert (
        page.locator("#exclusive-note").inner_text().startswith("Aligned at onset, the x axis counts steps")
    )
    page.uncheck("#align-onset")
    page.locator("#chart-success .g-xtitle").get_by_text("step", exact=True).wait_for()
    assert page.locator("#group-by").input_value() == "optim.actor_lr"
    page.locator("#group-summary").wait_for()  # the groups' table is back


def test_a_live_run_moves_on_along_its_training_time(page):
    from webapp.experiments.models import Run

    experiment = make_experiment(page.user, "live clock")
    run = trained_run(experiment, "seed=1", step=30)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.RUNNING)
    write_points(
        run.pk, [(s, "train/success", 0.5) for s in range(30)] + [(s, "time/step_s", 6.0) for s in range(30)]
    )
    page.set_viewport_size({"width": 390, "height": 900})  # a phone: the axis' title whole
    page.goto(f"{page.base}/compare?runs={run.pk}&x=time")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert chart_title(page) == "training time (minutes)" and last_tick(page, "success") <= 3.5  # 3 minutes
    write_points(
        run.pk,
        [(s, "train/success", 0.5) for s in range(30, 90)] + [(s, "time/step_s", 6.0) for s in range(30, 90)],
    )
    page.wait_for_function("document.body.dataset.chartsDrawn >= 2", timeout=15_000)  # the next poll
    assert last_tick(page, "success") >= 8  # 9 minutes now
