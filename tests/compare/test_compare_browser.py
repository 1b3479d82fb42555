"""The compare page in a real browser (Debian chromium through Playwright): runs ticked on two
experiment pages open one compare page with a coloured line per run in every chart, a legend click
hides a run everywhere, the diff table shows only differing fields, the summary sorts."""

import re

import pytest
from playwright.sync_api import expect

from tests.drawn_charts import drawn, last_tick, write_points
from tests.factories import insert_series, make_event, make_experiment, points, trained_run
from tests.helpers import REPO_ROOT, wait_for
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "compare"


def line_traces(page, chart):
    """[(name, colour, visible, number of points)] of a chart's per-run lines (no bands, no markers)."""
    return page.evaluate(f"""document.getElementById('chart-{chart}').data
        .filter(t => String(t.meta).startsWith('run-') && t.line && t.line.width > 0)
        .map(t => [t.name, t.line.color, t.visible, t.y.length])""")


def test_tick_runs_on_two_experiments_and_compare_them(page):
    lr = make_experiment(page.user, "lr sweep")
    grpo = make_experiment(page.user, "grpo try")
    runs = [
        trained_run(lr, "seed=1 lr=7e-4", overrides={"optim.actor_lr": 0.0007, "seed": 1}, step=100),
        trained_run(lr, "seed=2 lr=7e-4", overrides={"optim.actor_lr": 0.0007, "seed": 2}, step=100),
        trained_run(lr, "seed=3 lr=7e-4", overrides={"optim.actor_lr": 0.0007, "seed": 3}, step=100),
        trained_run(grpo, "seed=1", preset="grpo", overrides={"seed": 1}, step=100),
    ]
    for i, run in enumerate(runs):
        points(run, "train/success", {s: min(1.0, (i + 1) * s / 400) for s in range(100)})
        points(run, "actor/grad_norm", {s: 1.0 + i for s in range(100)})
        points(run, "val/success", {s: i / 10 for s in range(0, 100, 10)})
    make_event(runs[3], 60, "collapse")
    chosen = [runs[0], runs[2], runs[3]]

    page.goto(f"{page.base}/experiments/{lr.pk}/")
    page.check(f"input.compare-select[value='{runs[0].pk}']")
    page.check(f"input.compare-select[value='{runs[2].pk}']")
    page.goto(f"{page.base}/experiments/{grpo.pk}/")
    page.check(f"input.compare-select[value='{runs[3].pk}']")
    assert page.locator("#compare-count").text_content() == "3 runs selected"
    page.click("#compare-selected")
    page.wait_for_url(f"**/compare?runs={runs[0].pk},{runs[2].pk},{runs[3].pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    page.screenshot(path=str(ARTIFACTS / "compare-three-runs.png"), full_page=True)

    not_logged = page.locator("#not-logged").inner_text()
    assert not_logged.startswith("Not logged by these runs, so not drawn: ")
    assert "Reward mean" in not_logged and "Entropy" in not_logged and "Success" not in not_logged
    colours = None
    for chart in ("success", "reward", "grad_norm", "entropy"):
        if chart in ("reward", "entropy"):  # never logged by these runs: left out, named above the charts
            assert page.locator(f"#chart-{chart}").is_hidden()
            continue
        traces = line_traces(page, chart)
        per_run = [t for t in traces if t[0].startswith("#")]
        names = list(dict.fromkeys(t[0] for t in per_run))
        assert names == [f"#{run.pk} {run.label}" for run in chosen]
        chart_colours = list(dict.fromkeys(t[1] for t in per_run))
        assert len(chart_colours) == 3
        assert colours in (None, chart_colours)  # one colour per run in every chart
        colours = chart_colours
    success = line_traces(page, "success")
    assert [t[3] for t in success] == [100, 10, 100, 10, 100, 10]  # train (100 steps) and val (every 10)
    assert page.evaluate(
        "document.getElementById('chart-grad_norm').data.filter(t => t.meta === 'events')"
        ".map(t => Array.from(t.x))"
    ) == [[60]]
    assert (
        page.locator("#event-key")
        .inner_text()
        .startswith("The detector's markers, in each run's colour: ◇ info")
    )
    # The markers' events as a list, for a keyboard and a screen reader (a marker's message is a hover)
    page.get_by_text("The markers' detector events as a list (1)").click()
    [row] = page.locator("#compare-event-list tbody tr").all()
    assert row.locator("td").all_inner_texts()[:3] == [f"#{runs[3].pk} {runs[3].label}", "60", "collapse"]

    # A legend click hides the run in every chart, another click shows it again.
    legend_entry = page.locator("#run-legend .legend-entry", has_text=f"#{runs[2].pk} {runs[2].label}")
    legend_entry.click()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 2")
    assert legend_entry.get_attribute("aria-pressed") == "false"
    assert (
        page.locator("#draw-count").text_content()
        == "Drawing 2 of 3 runs (ticked but 1 hidden with the legend)."
    )
    for chart, lines_per_run in (("success", 2), ("grad_norm", 1)):
        assert [t[0] for t in line_traces(page, chart)] == [
            f"#{run.pk} {run.label}" for run in (runs[0], runs[3]) for _ in range(lines_per_run)
        ]
        # line paths in the SVG: two runs' lines and the dotted line at runs[3]'s collapse
        assert drawn_runs(page, chart)[0] == 2 * lines_per_run + 1
    legend_entry.click()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 3")
    assert drawn_runs(page, "grad_norm")[0] == 3 + 1
    # With the one run that has an event hidden, no marker is drawn and the key to them goes too.
    collapsed = page.locator("#run-legend .legend-entry", has_text=f"#{runs[3].pk} {runs[3].label}")
    collapsed.click()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 4")
    assert not page.locator("#event-key").is_visible()
    assert page.locator("#compare-events").is_hidden()  # and the list of them
    collapsed.click()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 5")
    assert page.locator("#event-key").is_visible()
    assert legend_entry.get_attribute("aria-pressed") == "true"

    # Config diff: only the differing fields until "differences only" is unticked.
    visible = page.locator("#config-diff tbody tr:visible th code").all_text_contents()
    assert set(visible) >= {"seed", "optim.actor_lr", "algorithm.advantage"}
    assert "env.name" not in visible and "rollout.group_size" not in visible
    page.uncheck("#diff-only")
    assert "env.name" in page.locator("#config-diff tbody tr:visible th code").all_text_contents()

    # Summary: one row per run; sorting by final success puts the best last, then first.
    rows = page.locator("#summary-table tbody tr")
    assert rows.count() == 3
    header = page.locator("#summary-table th", has_text="Train success (last)")
    header.click()
    order = page.eval_on_selector_all(
        "#summary-table tbody tr", "rows => rows.map(r => Number(r.dataset.run))"
    )
    assert order == [runs[0].pk, runs[2].pk, runs[3].pk]
    header.click()
    order = page.eval_on_selector_all(
        "#summary-table tbody tr", "rows => rows.map(r => Number(r.dataset.run))"
    )
    assert order == [runs[3].pk, runs[2].pk, runs[0].pk]

    # Grouping by experiment draws a mean with a band per group.
    page.select_option("#group-by", "experiment")
    page.wait_for_function("document.getElementById('chart-success').data.some(t => t.fill === 'toself')")
    groups = page.evaluate(
        "document.getElementById('chart-success').data"
        ".filter(t => String(t.meta).startsWith('group-')).map(t => t.name)"
    )
    assert groups[0].endswith("lr sweep (2 runs)") and groups[-1].endswith("grpo try (1 run)")
    page.screenshot(path=str(ARTIFACTS / "compare-grouped.png"), full_page=True)


def test_charts_of_live_runs_move_with_each_poll(page):
    experiment = make_experiment(page.user, "live pair")
    runs = [
        trained_run(
            experiment,
            f"seed={seed}",
            overrides={"seed": seed},
            status=Run.Status.RUNNING,
            step=0,
            total_steps=40,
        )
        for seed in (1, 2)
    ]
    zigzag = {s: (s * s % 7) / 7 for s in range(12)}  # no three points in line: each one is a vertex

    def send(run, steps, offset=0.0):
        write_points(run.pk, [(s, "train/success", zigzag[s] + offset) for s in steps])

    def vertices():  # of the drawn lines (the key legend's entries are traces that draw no line)
        return [n for n in drawn(page, "success")["lines"] if n]

    send(runs[0], range(3))
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    page.wait_for_selector("#load-state:has-text('live')")
    wait_for(lambda: vertices() == [3], timeout=15, message="the first run's 3 vertices")

    # Two more polls: the first run's line gains vertices, the second run's line appears, the axis extends.
    send(runs[0], range(3, 6))
    send(runs[1], range(5), offset=0.1)
    wait_for(lambda: vertices() == [6, 5], timeout=15, message="both runs drawn")
    send(runs[0], range(6, 12))
    wait_for(lambda: vertices() == [12, 5], timeout=15, message="12 vertices")
    assert last_tick(page, "success") >= 10

    # A detector event shows up as a marker without a reload; the polls stop once both runs have ended.
    page.evaluate("window.notReloaded = true")
    make_event(runs[1], 4, "collapse")
    wait_for(lambda: drawn(page, "success")["markers"][-1:] == [1], timeout=15, message="a live event marker")
    Run.objects.filter(pk__in=[run.pk for run in runs]).update(status=Run.Status.COMPLETED)
    page.wait_for_function("!document.getElementById('load-state').textContent.includes('live')")
    assert page.evaluate("window.notReloaded") is True
    # The runs table followed: statuses, the last success logged and the collapse, as a reload shows them.
    second = page.locator(f'#summary-table tr[data-run="{runs[1].pk}"] td')
    assert second.nth(3).inner_text() == "Completed"
    assert second.nth(4).inner_text() == f"{zigzag[4] + 0.1:.3g}"
    assert second.nth(8).inner_text() == "step 4"
    page.screenshot(path=str(ARTIFACTS / "compare-live.png"), full_page=True)


def test_live_summary_cells_read_as_the_servers_own(page):
    experiment = make_experiment(page.user, "ties")
    run = trained_run(experiment, "seed=1", status=Run.Status.RUNNING, step=0, total_steps=40)
    page.goto(f"{page.base}/compare?runs={run.pk}")
    page.wait_for_selector("#load-state:has-text('live')")
    # 5/16 is a tie at three digits (0.3125: "%g" alone writes 0.312, JavaScript 0.313); a large and
    # a small value in "%g" form.
    write_points(run.pk, [(3, "train/success", 0.3125), (3, "val/success", 1234567.0)])
    cells = page.locator(f'#summary-table tr[data-run="{run.pk}"] td')
    wait_for(lambda: cells.nth(4).inner_text() == "0.313", timeout=15, message="final success 0.313")
    assert cells.nth(6).inner_text() == "1.23e+06"
    write_points(run.pk, [(4, "val/success", 0.000012345)])
    wait_for(lambda: cells.nth(6).inner_text() == "1.23e-05", timeout=15, message="val 1.23e-05")
    live = cells.all_inner_texts()
    page.reload()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert cells.all_inner_texts() == live


def test_a_live_runs_steps_an_hour_follow_its_training(page):
    """The runs table's Steps / hour kept the value of the page's load: "–" all along for a run that had
    not logged a step yet, while its other cells followed the polls."""
    from datetime import timedelta

    from django.utils import timezone

    experiment = make_experiment(page.user, "speed")
    started = timezone.now() - timedelta(hours=2)
    run = trained_run(
        experiment, "seed=1", status=Run.Status.RUNNING, step=0, total_steps=4000, started_at=started
    )
    page.goto(f"{page.base}/compare?runs={run.pk}")
    page.wait_for_selector("#load-state:has-text('live')")
    speed = page.locator(f'#summary-table tr[data-run="{run.pk}"] td').nth(-2)
    assert speed.inner_text() == "–"
    Run.objects.filter(pk=run.pk).update(step=2400, heartbeat_at=started + timedelta(hours=2))
    write_points(run.pk, [(s, "train/success", 0.5) for s in range(3)])
    wait_for(lambda: speed.inner_text() == "1,200", timeout=15, message="1,200 steps an hour")
    page.reload()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert speed.inner_text() == "1,200"  # as the server writes it


def test_a_live_runs_leads_follow_its_collapse_and_a_new_rule_gets_its_column(page):
    """The Lead cells kept the page's load: a run that collapsed while the page was open still read "–"
    beside "Collapse: step 10" until a reload (a tester); a rule's first warning then asked for a reload for
    its column."""
    experiment = make_experiment(page.user, "live leads")
    run = trained_run(experiment, "seed=1", status=Run.Status.RUNNING, step=12, total_steps=100)
    write_points(run.pk, [(s, "train/success", 0.5) for s in range(12)])
    make_event(run, 3, "warning", rule="reward_std_drop")
    page.goto(f"{page.base}/compare?runs={run.pk}")
    page.wait_for_selector("#load-state:has-text('live')")
    lead = page.locator(f'#summary-table tr[data-run="{run.pk}"] td.lead')
    assert lead.all_inner_texts() == ["–"]  # no collapse yet
    make_event(run, 10, "collapse", rule="collapse")
    wait_for(lambda: lead.all_inner_texts() == ["7 steps"], timeout=15, message="a lead of 7 steps")
    make_event(run, 11, "warning", rule="entropy_rise")  # a column the page does not have
    wait_for(lambda: lead.all_inner_texts() == ["1 step late", "7 steps"], timeout=15, message="a new column")
    headers = page.locator("#summary-table th.lead-column")
    assert headers.all_inner_texts() == ["Lead: entropy_rise", "Lead: reward_std_drop"]
    headers.first.click()  # it sorts as the others do, and the address keeps it
    assert "sort=lead%3Aentropy_rise" in page.url or "sort=lead:entropy_rise" in page.url
    live = page.locator("#summary-table").inner_text()
    page.reload()
    page.wait_for_selector("#load-state:has-text('live')")
    assert page.locator("#summary-table").inner_text() == live  # as the server draws it


def test_a_live_runs_table_keeps_its_order_as_values_change(page):
    experiment = make_experiment(page.user, "live order")
    runs = [
        trained_run(experiment, f"seed={s}", status=Run.Status.RUNNING, step=5, total_steps=50)
        for s in (1, 2)
    ]
    for run, value in zip(runs, (0.2, 0.6)):
        write_points(run.pk, [(s, "train/success", value) for s in range(5)])
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}&sort=-final_success")
    page.wait_for_selector("#load-state:has-text('live')")
    order = page.locator("#summary-table tbody tr")
    assert [row.get_attribute("data-run") for row in order.all()] == [str(runs[1].pk), str(runs[0].pk)]
    write_points(runs[0].pk, [(5, "train/success", 0.9)])  # now the best last success
    Run.objects.filter(pk=runs[0].pk).update(step=6)
    wait_for(
        lambda: [row.get_attribute("data-run") for row in order.all()] == [str(runs[0].pk), str(runs[1].pk)],
        timeout=15,
        message="the rows sorted again by their new last success",
    )


def open_lr_pair(page, steps: int) -> list:
    """Two learning rates x two seeds, each with its own success curve, on one compare page, drawn."""
    experiment = make_experiment(page.user, "lr pair")
    runs = [
        trained_run(
            experiment, f"lr={lr} seed={seed}", overrides={"optim.actor_lr": lr, "seed": seed}, step=steps
        )
        for lr in (0.001, 0.0001)
        for seed in (1, 2)
    ]
    for i, run in enumerate(runs):
        points(run, "train/success", {s: (s * s % 7) / 7 + i / 10 for s in range(steps)})
    page.goto(f"{page.base}/compare?runs={','.join(str(run.pk) for run in runs)}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    return runs


def test_grouped_lines_and_table_swatches_share_the_group_colour(page):
    runs = open_lr_pair(page, 50)
    page.select_option("#group-by", "optim.actor_lr")
    page.wait_for_function("document.querySelectorAll('#chart-success .fills path').length >= 2")
    assert page.locator("#draw-count").text_content() == "Drawing 4 of 4 runs."
    first_group = page.locator("#run-legend .legend-entry").first
    first_group.click()  # a group's two runs hidden
    page.wait_for_function("document.getElementById('draw-count').textContent.startsWith('Drawing 2 ')")
    assert (
        page.locator("#draw-count").text_content()
        == "Drawing 2 of 4 runs (ticked but 2 hidden with the legend)."
    )
    first_group.click()
    page.wait_for_function("document.getElementById('draw-count').textContent === 'Drawing 4 of 4 runs.'")

    line_colours = page.evaluate("""Array.from(document.querySelectorAll('#chart-success path.js-line'))
        .map(p => getComputedStyle(p).stroke).filter(c => c !== 'rgba(0, 0, 0, 0)')""")
    swatch = (
        "(run) => getComputedStyle(document.querySelector(`#summary-table .swatch[data-run='${run}']`))"
        ".backgroundColor"
    )
    swatches = [page.evaluate(swatch, run.pk) for run in runs]
    assert swatches[0] == swatches[1] and swatches[2] == swatches[3] and swatches[0] != swatches[2]
    assert set(swatches) <= set(line_colours)
    page.screenshot(path=str(ARTIFACTS / "compare-grouped-colours.png"), full_page=True)

    # A group's mean says over how many runs it is taken: one run of the first pair stops at step 30.
    MetricPoint.objects.filter(run=runs[0], step__gte=30).delete()
    page.reload()
    page.wait_for_function("document.querySelectorAll('#chart-success .fills path').length >= 2")
    counts = page.evaluate("""document.getElementById('chart-success').data
        .filter(t => String(t.meta).startsWith('group-'))
        .map(t => [t.customdata[0], t.customdata[t.customdata.length - 1]])""")
    assert sorted(counts) == [[2, 1], [2, 2]]
    # Unticked, the bands go for groups too (they stayed, the toggle's label speaking of runs only).
    page.uncheck("#bands")
    page.wait_for_function("document.querySelectorAll('#chart-success .fills path').length === 0")
    assert (
        page.evaluate("document.getElementById('chart-success').data.filter(t => t.meta === 'band').length")
        == 0
    )


def test_grouped_runs_are_summarised_as_mean_and_std_over_their_seeds(page):
    runs = open_lr_pair(page, 50)
    assert page.locator("#group-summary").is_hidden()
    page.select_option("#group-by", "optim.actor_lr")
    page.wait_for_function("document.querySelectorAll('#group-table tbody tr').length === 2")
    assert page.locator("#group-summary-title").inner_text() == "Groups by optim.actor_lr"
    rows = page.locator("#group-table tbody tr").all_inner_texts()
    # last success i / 10 (49 * 49 % 7 = 0), best 4 / 7 + i / 10: each pair 0.1 apart, std 0.0707
    assert [row.split("\t")[1:] for row in rows] == [
        ["2", "0.05 ± 0.0707", "0.621 ± 0.0707", "–", "none of 2"],
        ["2", "0.25 ± 0.0707", "0.821 ± 0.0707", "–", "none of 2"],
    ]
    page.screenshot(path=str(ARTIFACTS / "compare-group-summary.png"), full_page=True)
    # A group is summarised over its runs drawn: untick one, and the first group is that one run.
    page.uncheck(f"input.draw-run[value='{runs[1].pk}']")
    page.wait_for_function(
        "document.querySelector('#group-table tbody tr').innerText.split('\\t')[1] === '1'"
    )
    assert page.locator("#group-table tbody tr").first.inner_text().split("\t")[1:] == [
        "1",
        "0",
        "0.571",
        "–",
        "none of 1",
    ]
    page.select_option("#group-by", "")
    page.wait_for_function("document.getElementById('group-summary').hidden")


def test_mlflow_runs_group_by_the_preset_their_scripts_logged(page):
    """An MLflow run has no preset of its own: grouping by the `preset` param its script logged put every
    run in one group, "preset = (none)" (a streamed FrozenLake sweep of StarPO against StarPO-S)."""
    from django.utils import timezone

    from webapp.tracking.models import ExternalExperiment, ExternalRun

    experiment = ExternalExperiment.create(page.user, "frozenlake sweep")
    runs = []
    for preset in ("starpo", "starpo-s"):
        for seed in (1, 2):
            external = ExternalRun.start(experiment, f"{preset} seed={seed}", {}, "carol", timezone.now())
            external.log([], {"preset": preset, "seed": str(seed)}, {})
            run = Run.objects.get(pk=external.run_id)
            points(run, "train/success", {s: s / 40 + (preset == "starpo-s") / 2 for s in range(20)})
            runs.append(run)
    page.goto(f"{page.base}/compare?runs={','.join(str(run.pk) for run in runs)}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    page.select_option("#group-by", "preset")
    page.wait_for_function("document.querySelectorAll('#group-table tbody tr').length > 0")
    rows = page.locator("#group-table tbody tr").all_inner_texts()
    assert [row.split("\t")[:2] for row in rows] == [["starpo", "2"], ["starpo-s", "2"]]
    assert page.locator("#run-legend .legend-entry").all_inner_texts() == [
        "preset = starpo (2 runs)",
        "preset = starpo-s (2 runs)",
    ]


def test_a_smoothed_group_mean_stays_inside_its_band(page):
    """The mean was smoothed and its runs' min..max band was not: at 0.5 the mean left its own band (a
    tester's PPO group: mean 0.35 over a band of 0.50-0.69)."""
    runs = open_lr_pair(page, 50)
    page.goto(
        f"{page.base}/compare?runs={','.join(str(run.pk) for run in runs)}&group=optim.actor_lr&smooth=0.6"
    )
    page.wait_for_function("document.querySelectorAll('#chart-success .fills path').length >= 2")
    outside = page.evaluate("""(() => {
      const data = document.getElementById('chart-success').data;
      const found = [];
      data.filter(t => String(t.meta).startsWith('group-')).forEach(line => {
        const band = data.find(t => t.meta === 'band' && t.uid === 'band-' + line.marker.color.slice(1));
        line.x.forEach((x, i) => {
          const edges = band.y.filter((y, j) => band.x[j] === x && y !== null);
          const y = line.y[i];
          if (y !== null && (y < Math.min(...edges) - 1e-9 || y > Math.max(...edges) + 1e-9)) found.push([x, y, edges]);
        });
      });
      return found;
    })()""")
    assert outside == []


# The vertical extent on screen (top and bottom, in px) of what a chart's SVG draws for one run: the
# fill of the band trace whose hover text names the run (the bands of one colour share a trace) and
# the run's line.
EXTENT = """([chart, name]) => {
  const div = document.getElementById(`chart-${chart}`);
  const traces = Array.from(div.querySelectorAll('.scatterlayer .trace'));
  const line = div._fullData.findIndex(t => t.name === name && t.meta !== 'band');
  const band = div._fullData.findIndex(t => t.meta === 'band' && t.text.some(s => s && s.startsWith(name)));
  const box = (el) => { const b = el.getBoundingClientRect(); return [b.top, b.bottom]; };
  return {
    band: Array.from(traces[band].querySelectorAll('.fills path')).map(box),
    line: Array.from(traces[line].querySelectorAll('path.js-line')).map(box),
  };
}"""

# The page position of the highest vertex of the band trace whose hover text names the run.
BAND_TOP = """([chart, name]) => {
  const div = document.getElementById(`chart-${chart}`);
  const band = div._fullData.find(t => t.meta === 'band' && t.text.some(s => s && s.startsWith(name)));
  let top = band.y.findIndex(y => y !== null);
  band.y.forEach((y, i) => { if (y !== null && y > band.y[top]) top = i; });
  const xa = div._fullLayout.xaxis, ya = div._fullLayout.yaxis, box = div.getBoundingClientRect();
  return [box.left + xa._offset + xa.c2p(band.x[top]), box.top + ya._offset + ya.c2p(band.y[top])];
}"""


def hover_text(page, x, y):
    """The hover label Plotly shows with the pointer at (x, y)."""
    page.mouse.move(x, y)
    label = page.locator(".hoverlayer .hovertext")
    label.first.wait_for()
    return " ".join(label.all_text_contents())


def spiky_runs(user, count, steps=3000):
    """`count` runs of `steps` steps (more than the page's points per run: downsampled), gradient norm
    about 1, and in the first run a one-step spike to 1000 in the middle of a chart bucket."""
    experiment = make_experiment(user, "spiky")
    runs = [trained_run(experiment, f"seed={s}", overrides={"seed": s}, step=steps) for s in range(count)]
    for i, run in enumerate(runs):
        insert_series(run, "actor/grad_norm", steps, f"1.0 + 0.1 * sin(s / 50.0 + {i})")
        insert_series(run, "train/success", steps, f"{i / count} + 0.01 * s / {steps}")
    MetricPoint.upsert(runs[0].pk, [(steps // 2 + 1, "actor/grad_norm", 1000.0)])
    return runs


def y_top(page, chart):
    """The largest y tick label of a chart (log axes write 1000 as 1k)."""
    labels = drawn(page, chart)["yticks"]
    return max(float(t.replace("k", "e3").replace("\u2212", "-")) for t in labels if t)


def test_a_one_step_spike_shows_as_the_runs_min_max_band(page):
    runs = spiky_runs(page.user, 2)
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert page.is_checked("#bands")  # drawn by default
    name = f"#{runs[0].pk} {runs[0].label}"
    extent = page.evaluate(EXTENT, ["grad_norm", name])
    ((band_top, band_bottom),) = extent["band"]
    line_tops = [top for top, _ in extent["line"]]
    # The 1000 at one step lies inside a bucket whose last point (the line) is about 1: only the band,
    # reaching far above the line, shows it; the axis reaches 1000 for it.
    assert band_top < min(line_tops) - 100
    assert y_top(page, "grad_norm") >= 1000
    # The band's top, pointed at, names the run that spiked, its key and its maximum.
    page.locator("#chart-grad_norm").scroll_into_view_if_needed()
    label = hover_text(page, *page.evaluate(BAND_TOP, ["grad_norm", name]))
    assert name in label and "actor/grad_norm max 1000" in label, label
    page.locator("#chart-grad_norm").screenshot(path=str(ARTIFACTS / "compare-spike-band.png"))

    page.uncheck("#bands")
    page.wait_for_function("!document.getElementById('chart-grad_norm').querySelector('.fills path')")
    assert y_top(page, "grad_norm") < 1000  # without the band the spike is gone from the chart


def test_a_zoom_into_long_runs_draws_the_zoomed_steps_own_points(page):
    """A tester's zoom into 20,000-step runs drew 20-step buckets' last values: with the bands off, a
    one-step spike was gone. A zoom fetches its range at its own resolution, and unzoomed, every step."""
    runs = spiky_runs(page.user, 2)
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}&bands=0&xrange=1450,1550")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 2")  # drawn, then its range fetched
    wait_for(lambda: y_top(page, "grad_norm") >= 1000, timeout=10, message="the spike at step 1501")
    page.locator("#chart-grad_norm").screenshot(path=str(ARTIFACTS / "compare-zoomed-spike.png"))
    page.locator("#chart-grad_norm").dblclick()  # back to every step: buckets again, the spike's gone
    wait_for(lambda: y_top(page, "grad_norm") < 1000, timeout=10, message="the whole runs again")
    assert "xrange" not in page.url


def drawn_runs(page, chart):
    """How many lines and how many band shapes a chart's SVG holds (each run: one of each here)."""
    return page.evaluate(
        """(id) => [document.querySelectorAll(`#${id} .scatterlayer path.js-line`).length,
                    document.querySelectorAll(`#${id} .scatterlayer .fills path`).length]""",
        f"chart-{chart}",
    )


def test_a_click_anywhere_in_a_header_cell_sorts_the_runs_table(page):
    """Only the header's label was a button: a click beside it, in a column the collapse badges make wide,
    did nothing."""
    experiment = make_experiment(page.user, "sort")
    runs = [trained_run(experiment, f"seed={seed}", overrides={"seed": seed}, step=20) for seed in (1, 2)]
    for i, run in enumerate(runs):
        points(run, "train/success", {s: (1 - i) * s / 40 for s in range(20)})
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    best = page.locator("#summary-table th", has_text="Train success (best)")
    box = best.bounding_box()
    best.click(position={"x": box["width"] - 2, "y": box["height"] - 2})
    assert best.get_attribute("aria-sort") == "ascending"
    order = page.eval_on_selector_all(
        "#summary-table tbody tr", "rows => rows.map(r => Number(r.dataset.run))"
    )
    assert order == [runs[1].pk, runs[0].pk]


def test_the_runs_tables_order_is_kept_in_the_address(page):
    """The order was lost on a reload, unlike the page's other view settings."""
    experiment = make_experiment(page.user, "sort")
    runs = [trained_run(experiment, f"seed={seed}", overrides={"seed": seed}, step=20) for seed in (1, 2, 3)]
    for run, last in zip(runs, (0.5, 0.9, 0.1)):
        points(run, "train/success", {s: last * s / 19 for s in range(20)})
    ids = ",".join(str(run.pk) for run in runs)
    page.goto(f"{page.base}/compare?runs={ids}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    header = page.locator("#summary-table th", has_text="Train success (last)")
    header.click()
    header.click()
    assert "sort=-final_success" in page.url
    descending = [runs[1].pk, runs[0].pk, runs[2].pk]
    assert table_order(page) == descending
    page.reload()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert table_order(page) == descending
    assert header.get_attribute("aria-sort") == "descending"
    assert page.locator("#summary-table th[aria-sort]").count() == 1

    # A column the table does not have leaves the page's order, and the page says so.
    page.goto(f"{page.base}/compare?runs={ids}&sort=-nope")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert table_order(page) == [run.pk for run in runs]
    assert page.locator("#summary-table th[aria-sort]").count() == 0
    assert "sort: '-nope' is not a column of the runs table" in page.inner_text("#compare-notices")


def table_order(page) -> list[int]:
    return page.eval_on_selector_all(
        "#summary-table tbody tr", "rows => rows.map(r => Number(r.dataset.run))"
    )


def test_the_runs_table_sorts_and_chooses_the_runs_drawn(page):
    runs = spiky_runs(page.user, 12)
    page.goto(f"{page.base}/compare?runs={','.join(str(run.pk) for run in runs)}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    legend = page.locator("#run-legend .legend-entry")
    assert legend.count() == 12
    assert page.locator("#draw-count").text_content() == "Drawing 12 of 12 runs."
    assert drawn_runs(page, "grad_norm") == [12, 12]  # every run: its line and its min..max band
    assert y_top(page, "grad_norm") >= 1000  # run 0's band reaches its spike
    page.screenshot(path=str(ARTIFACTS / "compare-12-runs.png"), full_page=True)

    # Sort the runs table by final success, best first, and draw its top 10 rows.
    # From the keyboard: the header is a button (Tab reaches it, Enter presses it).
    header = page.locator("#summary-table th", has_text="Train success (last)")
    button = page.get_by_role("button", name="Train success (last)")
    button.focus()
    page.keyboard.press("Enter")
    assert header.get_attribute("aria-sort") == "ascending"
    page.keyboard.press("Enter")
    assert header.get_attribute("aria-sort") == "descending"
    order = page.eval_on_selector_all(
        "#summary-table tbody tr", "rows => rows.map(r => Number(r.dataset.run))"
    )
    assert order == [run.pk for run in reversed(runs)]  # run i ends at success i / 12 + 0.01
    drawn_before = page.evaluate("Number(document.body.dataset.chartsDrawn)")
    page.click("#draw-top")
    page.wait_for_function(f"Number(document.body.dataset.chartsDrawn) > {drawn_before}")
    assert page.locator("#draw-count").text_content() == "Drawing 10 of 12 runs."
    assert legend.count() == 10
    assert legend.first.text_content() == f"#{runs[2].pk} {runs[2].label}"  # page order, the best 10
    assert not page.is_checked(f"input.draw-run[value='{runs[0].pk}']")
    assert drawn_runs(page, "grad_norm") == [10, 10]
    assert y_top(page, "grad_norm") < 1000  # the spiky run 0 is no longer drawn

    # Untick three more: one line each in every chart for the 7 runs left.
    for run in runs[2:5]:
        page.uncheck(f"input.draw-run[value='{run.pk}']")
    page.wait_for_function(
        "document.querySelectorAll('#chart-success .scatterlayer path.js-line').length === 7"
    )
    assert {t[0] for t in line_traces(page, "success")} == {f"#{run.pk} {run.label}" for run in runs[5:]}
    assert legend.count() == 7
    assert page.evaluate("document.getElementById('draw-all').indeterminate") is True
    page.screenshot(path=str(ARTIFACTS / "compare-7-of-12-runs.png"), full_page=True)

    # The subset is in the address: the copied link draws the same 7 runs.
    shared = page.url
    assert "draw=" in shared
    page.goto(f"{page.base}/")
    page.goto(shared)
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert page.locator("#draw-count").text_content() == "Drawing 7 of 12 runs."
    assert {t[0] for t in line_traces(page, "success")} == {f"#{run.pk} {run.label}" for run in runs[5:]}

    # The header box draws every run again, the spike with them.
    page.check("#draw-all")
    page.wait_for_function(
        "document.querySelectorAll('#chart-grad_norm .scatterlayer path.js-line').length === 12"
    )
    assert page.locator("#draw-count").text_content() == "Drawing 12 of 12 runs."
    assert "draw=" not in page.url
    assert y_top(page, "grad_norm") >= 1000


# The stroke colours of the line paths a chart's SVG draws, one per path.
LINE_STROKES = """(id) => Array.from(document.querySelectorAll(`#${id} .scatterlayer path.js-line`))
    .map(p => getComputedStyle(p).stroke)"""


def test_beyond_twenty_runs_the_runs_share_the_palettes_twenty_colours(page):
    runs = spiky_runs(page.user, 24, steps=1000)
    page.goto(f"{page.base}/compare?runs={','.join(str(run.pk) for run in runs)}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    # A line and a band per run, in at most 20 colours: at most 20 line traces and 20 band traces a key.
    assert drawn_runs(page, "grad_norm") == [24, 20]
    strokes = page.evaluate(LINE_STROKES, "chart-grad_norm")
    assert len(set(strokes)) == 20
    assert page.evaluate("document.getElementById('chart-grad_norm').data.length") <= 20 + 20 + 2
    assert y_top(page, "grad_norm") >= 1000  # run 0's band still reaches its spike
    # The 21st run's line, band and table swatch share one of the first 20 runs' colours; its line's
    # hover names it.
    name = f"#{runs[20].pk} {runs[20].label}"
    fill = page.evaluate(
        """(name) => document.getElementById('chart-grad_norm')._fullData
            .find(t => t.meta === 'band' && t.text.some(s => s && s.startsWith(name))).fillcolor""",
        name,
    )
    swatches = page.evaluate(
        """(runs) => runs.map(run => getComputedStyle(
            document.querySelector(`#summary-table .swatch[data-run='${run}']`)).backgroundColor)""",
        [run.pk for run in runs],
    )
    assert fill.replace(",0.12)", ")").replace("rgba", "rgb").replace(",", ", ") == swatches[20]
    assert swatches[20] in swatches[:20] and set(swatches) == set(strokes)
    # (on the success chart, where the runs' lines lie apart: run i at about i / 24)
    page.locator("#chart-success").scroll_into_view_if_needed()
    label = hover_text(page, *page.evaluate(LINE_POINT, ["success", name, 500]))
    assert name in label and "train/success" in label, label
    page.locator("#chart-grad_norm").screenshot(path=str(ARTIFACTS / "compare-24-runs-bands.png"))

    # Drawing 20 of them, each run has its own colour and its own line trace again.
    page.uncheck(f"input.draw-run[value='{runs[22].pk}']")
    page.uncheck(f"input.draw-run[value='{runs[23].pk}']")
    page.uncheck(f"input.draw-run[value='{runs[21].pk}']")
    page.uncheck(f"input.draw-run[value='{runs[0].pk}']")
    page.wait_for_function(
        "document.querySelectorAll('#chart-grad_norm .scatterlayer path.js-line').length === 20"
    )
    assert len(set(page.evaluate(LINE_STROKES, "chart-grad_norm"))) == 20
    assert {t[0] for t in line_traces(page, "grad_norm")} == {f"#{run.pk} {run.label}" for run in runs[1:21]}


# The page position of the point of a run's line at (or just before) a step, found through the trace
# that draws it (its hover text names the run).
LINE_POINT = """([chart, name, step]) => {
  const div = document.getElementById(`chart-${chart}`);
  const trace = div._fullData.find(t => t.meta !== 'band' && t.text && t.text.some(s => s && s === name));
  let at = -1;
  trace.x.forEach((x, i) => { if (trace.text[i] === name && x !== null && x <= step) at = i; });
  const xa = div._fullLayout.xaxis, ya = div._fullLayout.yaxis, box = div.getBoundingClientRect();
  return [box.left + xa._offset + xa.c2p(trace.x[at]), box.top + ya._offset + ya.c2p(trace.y[at])];
}"""


# The page position of the middle vertex of the line trace drawn for one run.
LINE_MIDDLE = """([chart, name]) => {
  const div = document.getElementById(`chart-${chart}`);
  const line = div._fullData.find(t => t.name === name && t.meta !== 'band');
  const i = Math.floor(line.x.length / 2);
  const xa = div._fullLayout.xaxis, ya = div._fullLayout.yaxis, box = div.getBoundingClientRect();
  return [box.left + xa._offset + xa.c2p(line.x[i]), box.top + ya._offset + ya.c2p(line.y[i])];
}"""


def test_a_label_that_looks_like_a_plotly_template_is_shown_as_written(page):
    experiment = make_experiment(page.user, "templates")
    runs = [trained_run(experiment, label, step=30) for label in ("lr 50%{y} %{x}", "plain")]
    for i, run in enumerate(runs):
        points(run, "train/success", {s: 0.2 + 0.3 * i + s / 700 for s in range(30)})
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    name = f"#{runs[0].pk} lr 50%{{y}} %{{x}}"
    page.locator("#chart-success").scroll_into_view_if_needed()
    label = hover_text(page, *page.evaluate(LINE_MIDDLE, ["success", name]))
    # the value in four significant digits (0.2 + 15 / 700 = 0.22142857...)
    assert name in label and "train/success 0.2214 at step 15" in label, label
    page.locator("#chart-success").screenshot(path=str(ARTIFACTS / "compare-template-label.png"))


def test_other_logged_keys_are_charted_and_ticked_on_and_off(page):
    experiment = make_experiment(page.user, "trl imports")
    a, b = trained_run(experiment, "a", step=40), trained_run(experiment, "b", step=40)
    zigzag = [(s, 1.0 + s % 2 / 10) for s in range(40)]  # no three points in a line: a vertex each
    MetricPoint.write_batch(a.pk, [(s, "train/loss", v) for s, v in zigzag], latest_metrics=True)
    MetricPoint.write_batch(b.pk, [(s, "train/loss", v + 1) for s, v in zigzag], latest_metrics=True)
    MetricPoint.write_batch(b.pk, [(2 * s, "loss,total", v) for s, v in zigzag[:20]], latest_metrics=True)
    page.goto(f"{page.base}/compare?runs={a.pk},{b.pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    # Few other keys: each has its chart from the start, in the picker's (natural) order, titled with
    # its key; a key holding a comma is fetched whole (key=, not split at the comma).
    assert drawn(page, "extra-0")["texts"] == ["loss,total"]
    assert drawn(page, "extra-0")["lines"] == [20]  # run b's 20 points, one line
    assert drawn(page, "extra-1")["texts"] == ["train/loss"]
    assert sorted(drawn(page, "extra-1")["lines"]) == [40, 40]
    page.screenshot(path=str(ARTIFACTS / "compare-other-keys.png"), full_page=True)

    # Shown as a table, unticked and ticked again: the chart comes back as the table, its switch on.
    page.get_by_label("Show loss,total as a table").check()
    page.get_by_role("region", name="loss,total as a table").wait_for()
    page.locator("#other-keys summary").click()
    page.uncheck("#other-keys input[value='loss,total']")
    page.wait_for_function("!document.getElementById('chart-extra-0')")
    page.check("#other-keys input[value='loss,total']")
    page.get_by_role("region", name="loss,total as a table").wait_for()
    assert page.get_by_label("Show loss,total as a table").is_checked()
    page.get_by_label("Show loss,total as a table").uncheck()
    wait_for(lambda: drawn(page, "extra-0")["lines"] == [20], timeout=10, message="the chart again")

    # Untick one: its chart goes and the address keeps the choice; a reload draws the same.
    page.uncheck("#other-keys input[value='loss,total']")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 2")
    assert page.locator("#chart-extra-0").count() == 0
    assert "extra=train%2Floss" in page.url
    page.reload()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert page.locator("#chart-extra-0").count() == 0
    assert sorted(drawn(page, "extra-1")["lines"]) == [40, 40]
    page.locator("#other-keys summary").click()  # folded while it has charts below it
    page.uncheck("#other-keys input[value='train/loss']")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 2")
    assert page.locator("#extra-charts figure").count() == 0
    page.reload()  # a lone extra= charts none
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert page.locator("#extra-charts figure").count() == 0
    assert page.locator("#other-keys input[value='train/loss']").is_visible()  # open: nothing charted


def test_long_key_names_are_asked_for_in_requests_any_server_accepts_and_joined(page):
    """40 ticked keys of 95 characters: the chart data comes in several requests, each within what
    gunicorn accepts (4,094 bytes; the tests' server takes 64k), joined into one set of charts."""
    keys = [f"timing_per_token_ms/{'update_actor_' * 5}{i}" for i in range(40)]
    experiment = make_experiment(page.user, "veRL imports")
    a, b = trained_run(experiment, "a", step=3), trained_run(experiment, "b", step=3)
    for run in (a, b):
        MetricPoint.write_batch(
            run.pk, [(s, k, (0.2, 0.9, 0.4)[s]) for s in range(3) for k in keys], latest_metrics=True
        )
    asked = []
    page.on("request", lambda request: asked.append(request.url) if "/api/compare?" in request.url else None)
    extra = "&".join(f"extra={key}" for key in keys)
    page.goto(f"{page.base}/compare?runs={a.pk},{b.pk}&{extra}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert page.locator("#extra-charts figure").count() == 40
    for chart in ("extra-0", "extra-39"):
        page.locator(f"#chart-{chart}").scroll_into_view_if_needed()
        assert sorted(drawn(page, chart)["lines"]) == [3, 3], chart
    assert len(asked) >= 2 and max(map(len, asked)) <= 3500, [len(url) for url in asked]

    # The page's own address keeps the choice within what a server takes: by the keys' places.
    page.locator("#other-keys summary").click()
    page.uncheck(f"#other-keys input[value='{keys[5]}']")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 2")
    assert "extra_at=0-4%2C6-39" in page.url and len(page.url) <= 3500, page.url
    page.reload()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    titles = page.evaluate(
        "Array.from(document.querySelectorAll('#extra-charts .gtitle')).map(t => t.textContent)"
    )
    assert len(titles) == 39 and keys[5] not in titles
    # Each title fits its chart, keeping the key's start and its end (where these keys differ): a key of
    # 95 characters was clipped at both ends of its centred title, and the 40 titles read alike.
    ends = sorted(title.rsplit("_", 1)[1] for title in titles)
    assert ends == sorted(str(i) for i in range(40) if i != 5)
    assert all(title.startswith("timing_per_token_ms/") and "\u2026" in title for title in titles), titles
    overflow = page.evaluate("""Array.from(document.querySelectorAll('#extra-charts figure')).filter(figure => {
        const title = figure.querySelector('.gtitle').getBoundingClientRect(), box = figure.getBoundingClientRect();
        return title.left < box.left || title.right > box.right; }).length""")
    assert overflow == 0


def test_a_key_that_looks_like_markup_is_drawn_as_written(page):
    experiment = make_experiment(page.user, "markup")
    a, b = trained_run(experiment, "a", step=3), trained_run(experiment, "b", step=3)
    for run in (a, b):
        MetricPoint.write_batch(
            run.pk, [(s, "<b>x</b>", (0.2, 0.9, 0.4)[s]) for s in range(3)], latest_metrics=True
        )
    page.goto(f"{page.base}/compare?runs={a.pk},{b.pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert drawn(page, "extra-0")["texts"] == ["<b>x</b>"]  # the chart's title as logged


def test_grouping_alignment_and_bands_are_kept_in_the_address(page):
    open_lr_pair(page, 30)
    page.select_option("#group-by", "optim.actor_lr")
    page.wait_for_function(
        "document.getElementById('chart-success').data.some(t => String(t.meta).startsWith('group-'))"
    )
    page.uncheck("#bands")
    assert "group=optim.actor_lr" in page.url and "bands=0" in page.url
    page.reload()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert page.locator("#group-by").input_value() == "optim.actor_lr"
    assert not page.locator("#bands").is_checked()
    legend = page.locator("#run-legend .legend-entry").all_inner_texts()
    assert len(legend) == 2 and all("(2 runs)" in text for text in legend)  # two groups, as before the reload
    page.check("#align-onset")
    # aligned lines are one per run: the grouping waits, kept in the address
    assert "align=1" in page.url and "group=optim.actor_lr" in page.url
    assert page.locator("#group-by").input_value() == ""
    assert page.locator("#exclusive-note").inner_text().startswith("Grouping is off while lines are aligned")
    page.reload()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert page.locator("#align-onset").is_checked() and page.locator("#group-by").input_value() == ""
    page.uncheck("#align-onset")  # and comes back when Align is unticked, after a reload too
    assert page.locator("#group-by").input_value() == "optim.actor_lr" and "align=1" not in page.url
    page.wait_for_function(
        "document.getElementById('chart-success').data.some(t => String(t.meta).startsWith('group-'))"
    )


def test_lines_hidden_with_the_legend_stay_hidden_in_a_reloaded_or_copied_address(page):
    runs = open_lr_pair(page, 30)
    page.dblclick(f"#run-legend .legend-entry >> text=#{runs[1].pk} {runs[1].label}")  # show it alone
    page.wait_for_function("document.getElementById('draw-count').textContent.includes('3 hidden')")
    hidden = ",".join(f"run-{run.pk}" for run in runs if run != runs[1])
    assert f"hide={hidden.replace(',', '%2C')}" in page.url
    page.reload()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert (
        page.locator("#draw-count").text_content()
        == "Drawing 1 of 4 runs (ticked but 3 hidden with the legend)."
    )
    assert [name for name, *_ in line_traces(page, "success")] == [f"#{runs[1].pk} {runs[1].label}"]
    assert drawn_runs(page, "success")[0] == 1  # one line in the SVG
    pressed = page.locator("#run-legend .legend-entry[aria-pressed='true']").all_inner_texts()
    assert pressed == [f"#{runs[1].pk} {runs[1].label}"]
    page.click(f"#run-legend .legend-entry >> text=#{runs[1].pk} {runs[1].label}")  # the last one too
    page.wait_for_function("document.getElementById('draw-count').textContent.includes('4 hidden')")
    assert drawn(page, "success")["texts"][-1] == "every line is hidden: click one in the legend above"
    assert drawn_runs(page, "success")[0] == 0
    assert drawn(page, "success")["yticks"] == [] and drawn(page, "success")["xticks"] == []
    page.click(f"#run-legend .legend-entry >> text=#{runs[1].pk} {runs[1].label}")
    page.wait_for_function("document.getElementById('draw-count').textContent.includes('3 hidden')")
    page.uncheck("#bands")  # the same lines without bands: still three hidden
    page.wait_for_function("document.getElementById('load-state').textContent === ''")  # loaded again
    assert (
        page.locator("#draw-count").text_content()
        == "Drawing 1 of 4 runs (ticked but 3 hidden with the legend)."
    )
    # Grouping makes other lines, none of them hidden; one line per run again, the runs hidden before are.
    page.select_option("#group-by", "optim.actor_lr")
    page.wait_for_function("document.getElementById('draw-count').textContent === 'Drawing 4 of 4 runs.'")
    page.locator("#run-legend .legend-entry").first.click()  # hides a group: two runs
    page.wait_for_function("document.getElementById('draw-count').textContent.includes('2 hidden')")
    page.uncheck(f"input.draw-run[value='{runs[0].pk}']")  # a hidden run unticked and ticked again, grouped
    page.wait_for_function("document.getElementById('draw-count').textContent.startsWith('Drawing 3 of 4')")
    page.check(f"input.draw-run[value='{runs[0].pk}']")
    page.wait_for_function("document.getElementById('draw-count').textContent === 'Drawing 4 of 4 runs.'")
    page.select_option("#group-by", "")
    page.wait_for_function("document.getElementById('draw-count').textContent.includes('3 hidden')")
    assert [name for name, *_ in line_traces(page, "success")] == [f"#{runs[1].pk} {runs[1].label}"]
    assert "group-" not in page.url


def test_a_hand_written_hide_keeps_only_the_runs_on_the_page(page):
    runs = open_lr_pair(page, 10)
    ids = ",".join(str(run.pk) for run in runs)
    page.goto(f"{page.base}/compare?runs={ids}&hide=garbage,run-999999,run-{runs[0].pk},run-x,group-")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert (
        page.locator("#draw-count").text_content()
        == "Drawing 3 of 4 runs (ticked but 1 hidden with the legend)."
    )
    page.click(f"#run-legend .legend-entry >> text=#{runs[1].pk} {runs[1].label}")
    page.wait_for_function("document.getElementById('draw-count').textContent.includes('2 hidden')")
    assert page.url.endswith(f"&hide=run-{runs[0].pk}%2Crun-{runs[1].pk}")


def test_every_chart_shows_one_step_range_and_a_double_click_gives_it_back(page):
    # Entropy logged from step 60 only: fitted to its own data, that chart put step 80 where the others
    # drew step 40.
    run = trained_run(make_experiment(page.user, "late keys"), "seed=1", step=100)
    points(run, "train/success", {s: s / 100 for s in range(100)})
    points(run, "actor/entropy", {s: 1.0 for s in range(60, 100)})
    page.goto(f"{page.base}/compare?runs={run.pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    whole = drawn(page, "success")["xticks"]
    assert whole[0] == "0" and drawn(page, "entropy")["xticks"] == whole

    page.goto(f"{page.base}/compare?runs={run.pk}&xrange=20,40")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert drawn(page, "entropy")["xticks"] == drawn(page, "success")["xticks"] != whole
    page.dblclick("#chart-success .nsewdrag")
    wait_for(lambda: drawn(page, "entropy")["xticks"] == whole, timeout=10, message="the whole run again")
    assert "xrange" not in page.url
    # and by keyboard: the steps typed, "Whole run" back
    page.get_by_label("Show steps from").fill("70")
    page.get_by_label("to", exact=True).fill("90")
    page.keyboard.press("Enter")
    wait_for(lambda: drawn(page, "entropy")["xticks"][0] == "70", timeout=10, message="the typed range")
    assert "xrange=70" in page.url
    page.get_by_role("button", name="Whole run").click()
    wait_for(lambda: drawn(page, "entropy")["xticks"] == whole, timeout=10, message="the whole run again")


def test_a_chart_of_two_keys_names_each_keys_line_style(page):
    experiment = make_experiment(page.user, "two keys")
    runs = [trained_run(experiment, f"seed={seed}", overrides={"seed": seed}, step=50) for seed in (1, 2)]
    for run in runs:
        points(run, "train/success", {s: s / 100 for s in range(50)})
        points(run, "val/success", {s: s / 80 for s in range(0, 50, 10)})
        points(run, "actor/grad_norm", {s: 1.0 for s in range(50)})
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert drawn(page, "success")["legend"] == ["train/success", "val/success"]
    assert drawn(page, "grad_norm")["legend"] == []  # one key: the title says which

    def dash_styles(selector):
        return page.evaluate(f"""Array.from(document.querySelectorAll('#chart-success {selector} path.js-line'))
            .map(p => p.style.strokeDasharray)""")

    dashes, drawn_dashes = dash_styles(".legend .traces"), dash_styles(".scatterlayer .trace")
    assert len(set(dashes)) == 2 and set(dashes) <= set(drawn_dashes)  # the legend's styles are the lines'
    page.locator("#chart-success").screenshot(path=str(ARTIFACTS / "compare-two-keys.png"))


def test_a_draw_list_of_runs_not_here_draws_every_run_and_says_so(page):
    experiment = make_experiment(page.user, "draw")
    runs = [trained_run(experiment, f"seed={seed}", overrides={"seed": seed}, step=20) for seed in (1, 2)]
    for run in runs:
        points(run, "train/success", {s: s / 40 for s in range(20)})
    elsewhere = runs[1].pk + 1  # no run of this page (99 was, once: the test database's ids had reached it)
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}&draw={elsewhere}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert f"draw: '{elsewhere}': not among the runs compared here; every run is drawn." in page.inner_text(
        "#compare-notices"
    )
    assert len({name for name, *_ in line_traces(page, "success")}) == 2


def open_grad_norms_below_zero(page, name: str) -> list:
    """Two runs' gradient norms on a compare page, drawn: the first's 6 of 20 at or below 0. Returns the runs."""
    experiment = make_experiment(page.user, name)
    runs = [trained_run(experiment, f"seed={seed}", overrides={"seed": seed}, step=20) for seed in (1, 2)]
    points(runs[0], "actor/grad_norm", {s: s - 5.5 for s in range(20)})  # 6 below 0
    points(runs[1], "actor/grad_norm", {s: s + 0.5 for s in range(20)})
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    return runs


def test_a_log_chart_leaves_values_at_or_below_zero_out_and_says_how_many(page):
    open_grad_norms_below_zero(page, "log")
    chart = drawn(page, "grad_norm")
    assert "6 values ≤ 0 not drawn on the log scale" in chart["texts"]
    # The first run's line is a gap where it is at or below 0, not a drop to the axis's floor
    assert sorted(n for n in chart["markers"] if n) == [14, 20]
    # 0.5 to 19.5: the 1, 2 and 5 of each decade (Plotly's every digit, written out whole, overlapped)
    assert [t for t in chart["yticks"] if t] == ["0.5", "1", "2", "5", "10", "20"]
    page.locator("#chart-grad_norm").screenshot(path=str(ARTIFACTS / "compare-log-gaps.png"))


def test_a_chart_switches_between_log_and_linear_as_on_the_run_page(page):
    """The compare page drew the gradient norm on a log axis with no way back to linear, so a run's values at
    or below 0 stayed out of sight; the run page has a switch above each chart, and both keep the choice."""
    runs = open_grad_norms_below_zero(page, "log switch")
    switch = page.get_by_label("Log scale for Gradient norm")
    assert switch.is_checked()
    assert "6 values ≤ 0 not drawn on the log scale" in drawn(page, "grad_norm")["texts"]

    switch.uncheck()
    wait_for(
        lambda: sorted(drawn(page, "grad_norm")["markers"])[-2:] == [20, 20],
        timeout=10,
        message="every point of both runs drawn",
    )
    chart = drawn(page, "grad_norm")
    assert not any("not drawn" in text for text in chart["texts"])
    assert "\u22125" in chart["yticks"]  # a linear axis, down to the first run's -5.5
    page.locator("#chart-grad_norm").screenshot(path=str(ARTIFACTS / "compare-linear-switch.png"))
    # Kept in this browser: the page reloaded, and a run page, draw it linear too.
    page.reload()
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    assert not page.get_by_label("Log scale for Gradient norm").is_checked()
    assert "\u22125" in drawn(page, "grad_norm")["yticks"]
    page.goto(f"{page.base}/runs/{runs[0].pk}/")
    page.wait_for_function("document.querySelector('#chart-grad_norm .scatterlayer .trace') !== null")
    assert not page.get_by_label("Log scale for Gradient norm").is_checked()


def test_on_a_phone_the_legend_of_five_runs_shows_every_run(page):
    # Its box showed three rows: the fourth of four runs hid below the fold, a run a reader never saw.
    experiment = make_experiment(page.user, "phone legend")
    runs = [
        trained_run(experiment, f"seed={seed} optim.actor_lr=3e-4", overrides={"seed": seed}, step=20)
        for seed in range(5)
    ]
    for run in runs:
        points(run, "train/success", {s: s / 40 for s in range(20)})
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{page.base}/compare?runs=" + ",".join(str(run.pk) for run in runs))
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    legend = page.locator("#run-legend")
    legend.scroll_into_view_if_needed()
    box = legend.bounding_box()
    entries = legend.locator(".legend-entry")
    assert entries.count() == 5
    for entry in entries.all():
        entry_box = entry.bounding_box()
        assert entry_box["y"] + entry_box["height"] <= box["y"] + box["height"] + 1, entry.inner_text()


def test_a_chart_of_zeros_has_no_negative_axis(page):
    # Every group of both runs had some spread: their fraction of zero-std groups, all 0, was drawn on -1..1.
    experiment = make_experiment(page.user, "zeros")
    runs = [trained_run(experiment, f"seed={seed}", overrides={"seed": seed}, step=20) for seed in (1, 2)]
    for run in runs:
        points(run, "train/frac_zero_std_groups", {s: 0.0 for s in range(20)})
    page.goto(f"{page.base}/compare?runs={runs[0].pk},{runs[1].pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    page.locator("#chart-zero_std").scroll_into_view_if_needed()
    ticks = [float(t.replace("\u2212", "-")) for t in drawn(page, "zero_std")["yticks"] if t]
    assert ticks and min(ticks) == 0


def test_a_chart_shown_as_a_table_holds_the_values_drawn_for_the_runs_shown_in_the_range(page):
    """The compare page's values for a reader who cannot see or point at a chart: a row per step and a
    column per run drawn, following the legend and the zoom as the chart does."""
    experiment = make_experiment(page.user, "as a table")
    first, second = (trained_run(experiment, f"seed={seed}", step=3) for seed in (1, 2))
    points(first, "train/success", {0: 0.1, 1: 0.2, 2: 0.3})
    points(second, "train/success", {0: 0.5, 2: 0.75})
    page.goto(f"{page.base}/compare?runs={first.pk},{second.pk}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")

    def table():
        region = page.get_by_role("region", name="Success (train and validation) as a table")
        header = region.locator("thead th").all_inner_texts()
        return header, [row.locator("th, td").all_inner_texts() for row in region.locator("tbody tr").all()]

    page.get_by_label("Show Success (train and validation) as a table").check()
    wait_for(lambda: table()[1], timeout=10, message="the table")
    assert table() == (
        ["step", f"#{first.pk} seed=1: train/success", f"#{second.pk} seed=2: train/success"],
        [["0", "0.1", "0.5"], ["1", "0.2", "–"], ["2", "0.3", "0.75"]],
    )
    assert not page.locator("#chart-success").is_visible()  # the table instead of the chart
    # A redraw that changes none of its values leaves the table as it is (a screen reader's place in it)
    page.locator("#table-success table").evaluate("table => { table.dataset.kept = 'yes'; }")
    drawn_before = page.evaluate("document.body.dataset.chartsDrawn")
    page.get_by_label("min..max bands").uncheck()
    page.wait_for_function(f"document.body.dataset.chartsDrawn > {drawn_before}")
    assert page.locator("#table-success table").get_attribute("data-kept") == "yes"

    page.locator("#run-legend .legend-entry", has_text=f"#{second.pk} seed=2").click()
    wait_for(lambda: len(table()[0]) == 2, timeout=10, message="the hidden run's column gone")
    page.get_by_label("Show steps from").fill("1")
    page.get_by_label("to", exact=True).fill("2")
    page.keyboard.press("Enter")
    wait_for(lambda: table()[1] == [["1", "0.2"], ["2", "0.3"]], timeout=10, message="the zoomed steps' rows")

    page.get_by_label("Show Success (train and validation) as a table").uncheck()
    wait_for(
        lambda: [n for n in drawn(page, "success")["lines"] if n] == [2], timeout=10, message="the chart back"
    )
    assert not page.get_by_role("region", name="Success (train and validation) as a table").count()


def test_what_the_hover_titles_say_is_there_for_a_reader_who_cannot_hover(page):
    """The runs table's headers and the chart controls explained themselves only on hover (the accessibility
    audit's finding): the words are in a list under the table, and the controls name theirs."""
    run = trained_run(make_experiment(page.user, "explained"), "seed=1", step=3)
    points(run, "train/success", {0: 0.1, 1: 0.2, 2: 0.3})
    page.goto(f"{page.base}/compare?runs={run.pk}")
    assert not page.get_by_text("The highest train/success.").is_visible()
    page.get_by_text("What the columns and the chart controls mean").click()
    assert page.get_by_text("The highest train/success.").is_visible()
    expect(page.get_by_label("min..max bands")).to_have_accessible_description(
        re.compile("^A run's band: its lowest")
    )
    expect(page.get_by_label("Align at onset")).to_have_accessible_description(
        re.compile("^Overlay the runs")
    )
    expect(page.get_by_label("X axis")).to_have_accessible_description(
        re.compile("^Each run's minutes of training")
    )


def test_a_groups_table_says_its_values_are_means_and_not_that_they_are_buckets(page):
    open_lr_pair(page, 12)
    page.get_by_label("Group runs by").select_option("optim.actor_lr")
    page.get_by_label("Show Success (train and validation) as a table").check()
    caption = page.get_by_role("region", name="Success (train and validation) as a table").locator("caption")
    grouped = "Success (train and validation) (12 rows). A group's value is the mean of its runs at the step."
    # (the runs' own table may show first, while the groups' means are fetched)
    wait_for(
        lambda: caption.inner_text() == grouped, timeout=10, message=f"the group table's caption: {grouped}"
    )


def test_runs_of_one_name_from_several_experiments_are_named_with_their_experiment(page):
    # Twelve runs from three grids of the same seeds: the legend and the hovers read "#223 seed=2" and
    # "#193 seed=2", told apart by their ids alone. A name no other experiment's run shares stays as it is.
    runs = []
    for name in ("Sokoban grid 22", "Sokoban grid 28"):
        experiment = make_experiment(page.user, name)
        runs += [trained_run(experiment, f"seed={seed}", overrides={"seed": seed}) for seed in (1, 2)]
    runs.append(trained_run(experiment, "seed=3", overrides={"seed": 3}))
    for run in runs:
        points(run, "train/success", {s: s / 10 for s in range(10)})
    page.goto(f"{page.base}/compare?runs={','.join(str(run.pk) for run in runs)}")
    page.wait_for_function("document.body.dataset.chartsDrawn >= 1")
    expected = [
        f"#{runs[0].pk} seed=1 (Sokoban grid 22)",
        f"#{runs[1].pk} seed=2 (Sokoban grid 22)",
        f"#{runs[2].pk} seed=1 (Sokoban grid 28)",
        f"#{runs[3].pk} seed=2 (Sokoban grid 28)",
        f"#{runs[4].pk} seed=3",
    ]
    assert page.locator("#run-legend .legend-entry").all_inner_texts() == expected
    assert list(dict.fromkeys(t[0] for t in line_traces(page, "success"))) == expected
