"""The runs table in chromium, as a person uses it: rows in order, a header click (or Enter on it)
sorts, hidden columns stay hidden after a reload, ticked runs feed the export link, and an archived
run leaves the table and comes back when restored."""

import pytest
from playwright.sync_api import expect

from tests.factories import table_run
from tests.helpers import REPO_ROOT
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "runs"


def expect_rows(page, names: list[str]):
    """The run names the table shows, top to bottom (waits for the page to settle on them)."""
    expect(page.locator("#runs-table tbody td[data-col=name] a")).to_have_text(names)


def test_sort_choose_columns_select_archive_and_restore(page):
    for label, best in (("alpha", 0.2), ("bravo", 0.9), ("charlie", 0.5)):
        run = table_run(page.user, label=label, status=Run.Status.COMPLETED)
        MetricPoint.upsert(run.pk, [(0, "val/success", best)])

    page.goto(f"{page.base}/runs/")
    expect_rows(page, ["charlie", "bravo", "alpha"])  # newest first
    assert page.locator("#runs-table td[data-col=best_val]").all_inner_texts() == ["0.5", "0.9", "0.2"]

    page.get_by_role("link", name="Val success (best)").click()
    expect_rows(page, ["bravo", "charlie", "alpha"])
    header = page.locator("th[data-col=best_val]")
    assert header.get_attribute("aria-sort") == "descending"
    header.get_by_role("link").focus()  # the header is a link: reachable by Tab, sorted with Enter
    page.keyboard.press("Enter")
    expect_rows(page, ["alpha", "charlie", "bravo"])
    assert page.locator("th[data-col=best_val]").get_attribute("aria-sort") == "ascending"

    page.get_by_text("Columns", exact=True).click()
    chooser = page.locator(".column-chooser")
    chooser.get_by_label("Environment").uncheck()
    assert not page.locator("th[data-col=env]").is_visible()
    chooser.get_by_label("Seed").check()
    page.reload()
    assert not page.locator("th[data-col=env]").is_visible()
    assert page.locator("th[data-col=seed]").is_visible()
    # The chooser closes as a menu does: Escape, or a click outside it (it covered the rows' checkboxes).
    page.get_by_text("Columns", exact=True).click()
    assert chooser.get_by_label("Seed").is_visible()
    page.keyboard.press("Escape")
    expect(chooser.get_by_label("Seed")).to_be_hidden()
    page.get_by_text("Columns", exact=True).click()
    page.locator("h1").click()
    expect(chooser.get_by_label("Seed")).to_be_hidden()

    export = page.locator("#runs-export")
    assert export.inner_text() == "Export selected as CSV"
    page.get_by_label("Select alpha").check()
    page.get_by_label("Select bravo").check()
    expect(export).to_have_text("Export 2 selected as CSV")  # set once compare_select.js has saved the ticks
    assert page.locator("#compare-count").inner_text() == "2 runs selected"

    page.get_by_role("button", name="Archive alpha").click()
    expect(page.get_by_text("Archived alpha")).to_be_visible()
    expect_rows(page, ["charlie", "bravo"])
    page.get_by_role("link", name="Archived", exact=True).click()
    expect_rows(page, ["alpha"])
    page.get_by_role("button", name="Restore alpha").click()
    expect(page.get_by_text("Restored alpha.")).to_be_visible()
    page.get_by_role("link", name="Active", exact=True).click()
    expect_rows(page, ["charlie", "bravo", "alpha"])

    # The ticked runs (alpha and bravo, still ticked) archived at once, and restored at once.
    page.get_by_role("button", name="Archive 2 selected").click()
    expect(page.get_by_text("Archived 2 selected runs: alpha, bravo.")).to_be_visible()
    expect_rows(page, ["charlie"])
    page.get_by_role("link", name="Archived", exact=True).click()
    expect_rows(page, ["bravo", "alpha"])
    page.screenshot(path=str(ARTIFACTS / "runs-table-restore-selected.png"))
    page.get_by_role("button", name="Restore 2 selected").click()
    expect(page.get_by_text("Restored 2 selected runs: alpha, bravo.")).to_be_visible()
    page.get_by_role("button", name="Clear selection").click()
    expect(page.get_by_role("button", name="Restore selected")).to_be_disabled()


def test_the_table_scrolls_inside_itself_on_a_phone(page):
    table_run(page.user, label="phone-run", tags=["a-long-tag-name"])
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{page.base}/runs/")
    right, box_width, content_width = page.evaluate("""(() => {
        const box = document.querySelector('.table-scroll');
        return [box.getBoundingClientRect().right, box.clientWidth, box.scrollWidth]; })()""")
    assert right <= 390  # the table's box fits the screen
    assert content_width > box_width  # and the table scrolls inside it
    box = page.get_by_role("region", name="Runs table")
    box.focus()  # reachable by keyboard, so arrow keys scroll it
    page.keyboard.press("ArrowRight")
    page.wait_for_function("document.querySelector('.table-scroll').scrollLeft > 0")


def summarised_run(user, experiment: str, label: str, tags: list[str]) -> Run:
    """A run with every summary column filled: validation and train success, a collapse, tags."""
    from webapp.alerts.models import DetectorEvent

    run = table_run(user, experiment=experiment, label=label)
    run.tags = tags
    run.save()
    MetricPoint.upsert(run.pk, [(0, "val/success", 0.75), (0, "train/success", 0.125)])
    DetectorEvent.objects.create(run=run, step=112, level="collapse", rule="collapse", message="fell")
    return run


def test_no_column_is_covered_as_the_table_scrolls_sideways(page):
    # The row actions were kept in view at the right edge, over the summary columns before them: at
    # 1280 px a tester read "CO… AT" for "Collapse at step", and none of its steps.
    summarised_run(
        page.user,
        "FrozenLake StarPO vs StarPO-S",
        "seed=1 algorithm.filter_ratio=0.25",
        ["baseline", "paper"],
    )
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{page.base}/runs/")
    covered = """(() => {
        const box = document.querySelector('.table-scroll').getBoundingClientRect();
        return Array.from(document.querySelectorAll('#runs-table tbody td:not([hidden])')).filter(cell => {
            const r = cell.getBoundingClientRect(), x = r.left + r.width / 2, y = r.top + r.height / 2;
            if (x < box.left || x > box.right) return false;  // scrolled out of view, not covered
            return !cell.contains(document.elementFromPoint(x, y));
        }).map(cell => cell.dataset.col || cell.className); })()"""
    for scrolled in (0, 10_000):  # at the start and scrolled to the end
        page.evaluate(f"document.querySelector('.table-scroll').scrollLeft = {scrolled}")
        assert page.evaluate(covered) == []
    page.evaluate("document.querySelector('.table-scroll').scrollLeft = 0")
    assert page.locator("td[data-col=collapse]").inner_text() == "112"
    assert page.locator("td[data-col=collapse]").is_visible()


def test_more_runs_selected_than_one_export_takes_say_so_instead_of_leaving_the_page(page, monkeypatch):
    from webapp.runs import views

    monkeypatch.setattr(views, "MAX_EXPORT_RUNS", 2)
    for name in ("alpha", "bravo", "charlie"):
        table_run(page.user, label=name)
    page.goto(f"{page.base}/runs/")
    for name in ("alpha", "bravo"):
        page.get_by_label(f"Select {name}").check()
    export = page.locator("#runs-export")
    expect(export).to_have_text("Export 2 selected as CSV")
    page.get_by_label("Select charlie").check()
    expect(export).to_have_text("3 selected: export at most 2 at once")
    assert export.get_attribute("aria-disabled") == "true"
    export.click(force=True)  # (Playwright itself will not click a link marked disabled)
    assert page.url == f"{page.base}/runs/"  # still on the table


def test_a_sweeps_default_columns_fit_a_1280_px_screen(page):
    # A tester's four-run sweep with two tags a run needed a sideways scroll for its Tags and actions
    # (1,486 px of table in a 1,235 px page).
    statuses = ("queued", "running", "completed", "failed")  # a queued run's cell says where it waits
    for seed, (lr, status) in enumerate(zip(("1e-4", "3e-4", "1e-3", "3e-3"), statuses)):
        label = f"seed={seed} optim.actor_lr={lr}"
        run = summarised_run(
            page.user, "FrozenLake StarPO vs StarPO-S sweep", label, ["baseline", "paper-figure-3"]
        )
        Run.objects.filter(pk=run.pk).update(status=status, step=30, total_steps=100)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{page.base}/runs/")
    box_width, table_width = page.evaluate(
        "[document.querySelector('.table-scroll').clientWidth, document.querySelector('#runs-table').scrollWidth]"
    )
    assert table_width <= box_width
    expect(page.get_by_role("button", name="Archive seed=0 optim.actor_lr=1e-4")).to_be_in_viewport()


def test_a_very_long_name_takes_three_lines_and_keeps_the_whole_name_in_its_title(page):
    """A tester's name of 200 letters without a space made its row about 400 px tall."""
    name = "x" * 120 + "y" * 80
    run = summarised_run(page.user, "long names", "seed=1", [])
    Run.objects.filter(pk=run.pk).update(name=name)
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{page.base}/runs/")
    link = page.locator("#runs-table tbody td[data-col=name] a").first
    assert link.get_attribute("title") == name and link.inner_text() == name  # read out whole
    line = page.evaluate(
        "parseFloat(getComputedStyle(document.querySelector('#runs-table td[data-col=name] a')).lineHeight)"
    )
    assert link.bounding_box()["height"] <= 3 * line + 1
    assert page.locator("#runs-table tbody tr").first.bounding_box()["height"] < 120
    page.locator("#runs-table").screenshot(
        path=str(REPO_ROOT / "test-artifacts" / "ui" / "runs-long-name.png")
    )


def test_a_config_value_added_as_a_column_by_keyboard_sorts_and_goes(page):
    # A grid over the KL coefficient, and a TRL run logged through MLflow (its params flat, as text)
    for label, config in (
        ("kl-0.01", {"algorithm": {"kl_coef": 0.01}}),
        ("kl-0.001", {"algorithm": {"kl_coef": 0.001}}),
        ("trl", {"learning_rate": "1e-05", "beta": "0.04"}),
    ):
        table_run(page.user, label=label, config=config)
    page.goto(f"{page.base}/runs/")
    page.get_by_text("Columns", exact=True).click()
    path = page.get_by_label("A config value as a column")
    path.focus()
    page.keyboard.type("algorithm.kl_coef")
    page.keyboard.press("Enter")
    header = page.locator("th.config-col", has_text="algorithm.kl_coef")
    expect(header).to_be_visible()
    assert page.locator("#runs-table td.config-col").all_inner_texts() == ["–", "0.001", "0.01"]

    header.locator("a").first.click()  # the name, then the remove link
    expect_rows(page, ["kl-0.001", "kl-0.01", "trl"])  # by value, the run without one last
    header.locator("a").first.click()  # the name, then the remove link
    expect_rows(page, ["kl-0.01", "kl-0.001", "trl"])

    # A filter keeps the column; a second column comes from the same box; removing one keeps the other.
    page.get_by_label("Search").fill("sweep")
    page.get_by_role("button", name="Filter").click()
    expect(header).to_be_visible()
    page.get_by_text("Columns", exact=True).click()
    page.get_by_label("A config value as a column").fill("beta")
    page.get_by_role("button", name="Add column").click()
    expect(page.locator("th.config-col", has_text="beta")).to_be_visible()
    expect_rows(page, ["kl-0.01", "kl-0.001", "trl"])
    page.get_by_text(
        "Columns", exact=True
    ).click()  # the shown config columns are listed there, each to remove
    page.get_by_role("link", name="Remove the column algorithm.kl_coef").click()
    expect(header).to_have_count(0)
    assert page.locator("#runs-table td.config-col").all_inner_texts() == ["0.04", "–", "–"]


def experiment_filter(page):
    return page.get_by_role("combobox", name="Experiment")


def test_the_experiment_a_link_filters_by_is_shown_and_kept_by_the_next_filter(page):
    # The experiment page's "restore on the runs table" opens ?experiment=<id>: the table showed that
    # experiment's runs alone with nothing on the page saying so, and the next Filter click (a search,
    # a status) dropped it: a tester's 9 runs became all 295.
    for label in ("grid-a", "grid-b"):
        table_run(page.user, experiment="Sokoban grid", label=label, env="sokoban")
    table_run(page.user, experiment="Bandit sweep", label="other-run")
    sokoban = page.user.experiments.get(name="Sokoban grid")
    page.goto(f"{page.base}/runs/?experiment={sokoban.pk}")
    expect(experiment_filter(page).locator("option:checked")).to_have_text("Sokoban grid")
    expect_rows(page, ["grid-b", "grid-a"])
    page.get_by_label("Search").fill("grid-a")
    page.get_by_role("button", name="Filter").click()
    expect_rows(page, ["grid-a"])
    expect(experiment_filter(page).locator("option:checked")).to_have_text("Sokoban grid")
    page.get_by_label("Search").fill("")
    experiment_filter(page).select_option(label="Any")
    page.get_by_role("button", name="Filter").click()
    expect_rows(page, ["other-run", "grid-b", "grid-a"])
    page.goto(f"{page.base}/runs/?experiment=999999")  # a deleted experiment's link
    expect(experiment_filter(page).locator("option:checked")).to_have_text(
        "experiment 999999: none of your runs"
    )
    expect(page.get_by_text("No runs match these filters.")).to_be_visible()
    # An experiment named at length (up to 200 characters) keeps the filters inside a phone's width
    table_run(page.user, experiment="Sokoban StarPO vs StarPO-S, learning rate by KL coefficient " * 3)
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{page.base}/runs/")
    assert page.evaluate("document.documentElement.scrollWidth") == 390


# Whether a field's placeholder overflows it: typed in as its value, the text laid out as the hint is
PLACEHOLDER_CUT = """(field) => {
    const before = field.value;
    field.value = field.placeholder;
    const cut = field.scrollWidth > field.clientWidth;
    field.value = before;
    return cut; }"""


def test_the_search_fields_hint_is_read_whole_on_a_wide_screen_and_a_phone(page):
    # At 1280 px the search field read "name, label, experimer": what the search looks in, cut off.
    table_run(page.user, label="a-run")
    for width in (1280, 390):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{page.base}/runs/")
        search = page.get_by_label("Search")
        assert search.get_attribute("placeholder") == "name, label, experiment, notes"
        assert not search.evaluate(PLACEHOLDER_CUT), f"at {width} px"
        assert page.evaluate("document.documentElement.scrollWidth") == width


def test_archived_runs_are_deleted_in_bulk_after_a_confirmation_and_leave_the_selection(page):
    # A lab of 300 runs could delete only one at a time, from each run's page.
    for label in ("old-1", "old-2", "keep"):
        table_run(page.user, label=label, status=Run.Status.COMPLETED).archive()
    page.goto(f"{page.base}/runs/?archived=true")
    page.get_by_label("Select old-1").check()
    page.get_by_label("Select old-2").check()
    questions = []

    def answer(dialog):
        questions.append(dialog.message)
        dialog.dismiss() if len(questions) == 1 else dialog.accept()

    page.on("dialog", answer)
    page.get_by_role("button", name="Delete 2 selected").click()  # asked, and declined: nothing deleted
    assert questions[0].startswith("Delete 2 selected runs for good?")
    expect_rows(page, ["keep", "old-2", "old-1"])
    page.get_by_role("button", name="Delete 2 selected").click()
    expect(page.get_by_text("Deleted 2 selected runs for good")).to_be_visible()
    expect_rows(page, ["keep"])
    # The deleted runs are no longer counted as selected, nor sent to Compare or Export
    expect(page.locator("#compare-tray")).to_be_hidden()
    expect(page.get_by_role("button", name="Delete selected")).to_be_disabled()
    page.get_by_role("link", name="Active", exact=True).click()
    expect(page.get_by_role("button", name="Archive selected")).to_be_disabled()
    assert page.get_by_role("button", name="Delete selected").count() == 0  # for archived runs alone


# The words of the cells' links that the page draws over two lines, broken inside the word (a word of a
# config path is its parts between dots, after which the page may break it)
BROKEN_WORDS = """(selector) => Array.from(document.querySelectorAll(selector)).flatMap(link => {
    const broken = [];
    for (const text of Array.from(link.childNodes).filter(node => node.nodeType === Node.TEXT_NODE))
    for (const word of text.data.matchAll(/\\S+/g)) {
        const range = document.createRange();
        range.setStart(text, word.index);
        range.setEnd(text, word.index + word[0].length);
        const lines = new Set(Array.from(range.getClientRects()).map(rect => Math.round(rect.top)));
        if (lines.size > 1) broken.push(word[0]);
    }
    return broken; })"""


def test_a_grids_run_names_wrap_between_words_not_inside_them_at_1280_px(page):
    # A tester's grid read "preset=starp / o-s seed=8" at 1280 px: starpo and starpo-s, the runs to tell
    # apart, cut in the middle. The sweep of the 1280 px test above, with a grid over the preset.
    statuses = ("queued", "running", "completed", "failed")
    for seed, (preset, status) in enumerate(zip(("starpo", "starpo-s", "starpo", "starpo-s"), statuses)):
        run = summarised_run(
            page.user, "FrozenLake StarPO vs StarPO-S sweep", f"preset={preset} seed={seed}", ["baseline"]
        )
        Run.objects.filter(pk=run.pk).update(status=status, step=30, total_steps=100)
    table_run(page.user, experiment="lr grid", label="seed=0 optim.actor_lr=1e-4 algorithm.kl_coef=0.001")
    page.set_viewport_size({"width": 1280, "height": 900})
    page.goto(f"{page.base}/runs/")
    assert page.evaluate(BROKEN_WORDS, "#runs-table td[data-col=name] > a") == []
    box_width, table_width = page.evaluate(
        "[document.querySelector('.table-scroll').clientWidth, document.querySelector('#runs-table').scrollWidth]"
    )
    assert table_width <= box_width  # and the table still fits the screen
