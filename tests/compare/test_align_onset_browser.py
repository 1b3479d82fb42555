"""Compare page, "align at onset", in a real browser: the runs that collapsed are overlaid with x = steps
from their first collapse, the others left out with a note; the summary lists each rule's lead."""

import pytest

from tests.factories import make_event, make_experiment, points, trained_run
from tests.helpers import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def run_lines(page, chart):
    """{trace name: (first x, last x)} of a chart's per-run lines."""
    return page.evaluate(f"""Object.fromEntries(document.getElementById('chart-{chart}').data
        .filter(t => String(t.meta).startsWith('run-') && t.line && t.line.width > 0)
        .map(t => [t.name, [t.x[0], t.x[t.x.length - 1]]]))""")


def test_align_at_onset_overlays_collapsed_runs_and_leaves_the_others_out_with_a_note(page):
    experiment = make_experiment(page.user, "lr sweep")
    early = trained_run(experiment, "seed=1", step=100)
    late = trained_run(experiment, "seed=2", step=100)
    healthy = trained_run(experiment, "seed=3", step=100)
    for run in (early, late, healthy):
        points(run, "train/success", {s: 0.5 for s in range(100)})
    points(healthy, "actor/clip_frac", {s: 0.1 for s in range(100)})  # only a run left out when aligned
    make_event(early, 40, "collapse", rule="success_collapse")
    make_event(early, 25, "warning", rule="reward_std_drop")
    make_event(late, 60, "collapse", rule="success_collapse")
    make_event(late, 52, "warning", rule="reward_std_drop")
    page.goto(f"{page.base}/compare?runs={early.pk},{late.pk},{healthy.pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    name = {run: f"#{run.pk} {run.label}" for run in (early, late, healthy)}
    assert run_lines(page, "success") == {name[early]: [0, 99], name[late]: [0, 99], name[healthy]: [0, 99]}
    leads = page.locator("#summary-table tbody tr td.lead").all_text_contents()
    assert leads == ["15 steps", "8 steps", "–"]
    assert not page.locator("#align-note").is_visible()

    drawn_before = page.evaluate("Number(document.body.dataset.chartsDrawn)")
    page.check("#align-onset")
    page.wait_for_function(f"Number(document.body.dataset.chartsDrawn) > {drawn_before}")
    assert run_lines(page, "success") == {name[early]: [-40, 59], name[late]: [-60, 39]}
    collapse_x = page.evaluate(
        "document.getElementById('chart-success').data.find(t => t.meta === 'collapse-lines').x"
    )
    assert [x for x in collapse_x if x is not None] == [0, 0, 0, 0]  # both collapses at the origin
    assert page.locator("#chart-success .xtitle").text_content() == "steps from the run's first collapse"
    # The keyboard's zoom says its units once (it read "Show steps from onset from ... to").
    assert page.locator("label[for=range-from]").inner_text() == "Show steps relative to onset from"
    # The clip chart has no aligned run to draw: "no data", and not the step axis (0-99) it had before
    clip = page.locator("#chart-clip")
    assert clip.get_by_text("no data").is_visible()
    assert "80" not in clip.locator(".xtick").all_text_contents()
    note = page.locator("#align-note")
    assert note.is_visible() and name[healthy] in note.text_content()
    assert name[early] not in note.text_content()
    assert (
        page.locator("#draw-count").text_content()
        == "Drawing 2 of 3 runs (ticked but 1 with no collapse to align at)."
    )
    page.screenshot(
        path=str(REPO_ROOT / "test-artifacts" / "compare" / "compare-align-onset.png"), full_page=True
    )

    drawn_before = page.evaluate("Number(document.body.dataset.chartsDrawn)")
    page.uncheck("#align-onset")
    page.wait_for_function(f"Number(document.body.dataset.chartsDrawn) > {drawn_before}")
    assert run_lines(page, "success")[name[healthy]] == [0, 99]
    assert not note.is_visible()


def test_at_1280_px_the_runs_table_shows_its_last_column_beside_three_lead_columns(page):
    experiment = make_experiment(page.user, "lr sweep with a long experiment name")
    runs = [trained_run(experiment, f"seed={seed} optim.actor_lr=0.0005", step=100) for seed in range(2)]
    for run in runs:
        points(run, "train/success", {s: 0.5 for s in range(100)})
        make_event(run, 60, "collapse", rule="success_collapse")
    make_event(runs[0], 25, "warning", rule="reward_std_drop")
    make_event(runs[0], 28, "warning", rule="zero_std_groups")
    make_event(runs[1], 52, "warning", rule="template_collapse")
    page.set_viewport_size({"width": 1280, "height": 800})
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    box = page.locator(".runs-scroll").bounding_box()
    device = page.locator("#summary-table th", has_text="Device").bounding_box()
    assert device["x"] + device["width"] <= box["x"] + box["width"]  # not off to the right
    assert page.evaluate("document.querySelector('.runs-scroll').scrollWidth") <= box["width"] + 1
    page.locator(".runs-scroll").screenshot(
        path=str(REPO_ROOT / "test-artifacts" / "compare" / "runs-table-1280.png")
    )
