"""A run's own name, given on the runs table, is what every page calls it (run page, experiment page,
compare page: its table and its chart legend), and archived runs stay off the experiment page unless asked for."""

import pytest
from playwright.sync_api import expect

from tests.factories import make_experiment, points, trained_run
from tests.helpers import REPO_ROOT

pytestmark = [pytest.mark.browser, pytest.mark.slow]
ARTIFACTS = REPO_ROOT / "test-artifacts" / "ui"


def test_a_name_given_on_the_runs_table_names_the_run_everywhere(page):
    experiment = make_experiment(page.user, "lr sweep")
    named, other = (
        trained_run(experiment, f"seed={seed}", overrides={"seed": seed}, step=20) for seed in (1, 2)
    )
    for run in (named, other):
        points(run, "train/success", {s: (s % 5) / 5 for s in range(20)})

    page.goto(f"{page.base}/runs/")
    page.get_by_role("link", name="Edit seed=1").click()
    page.get_by_label("Name").fill("baseline lr=7e-4")
    page.get_by_role("button", name="Save").click()
    page.wait_for_url("**/runs/")

    page.goto(f"{page.base}/runs/{named.pk}/")
    assert page.locator("h1").inner_text().startswith("baseline lr=7e-4")
    assert page.locator("#run-label").inner_text() == "seed=1"  # the label stays in sight, under the name
    assert "baseline lr=7e-4" in page.title()

    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    first_row = page.locator("table.runs tbody tr").first
    assert first_row.get_by_role("link").first.inner_text() == "baseline lr=7e-4"
    assert page.locator("table.runs").get_by_role("link", name="seed=2").is_visible()

    page.goto(f"{page.base}/compare?runs={named.pk},{other.pk}")
    summary = page.locator("#summary-table tbody")
    assert summary.get_by_role("link", name="baseline lr=7e-4").is_visible()
    # The legend above the charts (a click there hides the run's lines) calls it by its name.
    page.locator("#run-legend").get_by_text(f"#{named.pk} baseline lr=7e-4").wait_for()
    assert (
        f"#{named.pk} baseline lr=7e-4" in page.locator("#config-diff thead").inner_text().lower()
    )  # CSS capitals
    page.screenshot(path=str(ARTIFACTS / "compare-named-run.png"), full_page=True)


def test_archived_runs_are_hidden_on_the_experiment_page_with_a_note_and_a_way_to_show_them(page):
    experiment = make_experiment(page.user, "seeds")
    kept, archived, also_archived = (trained_run(experiment, f"seed={seed}") for seed in (1, 2, 3))

    page.goto(f"{page.base}/runs/")
    for run in (archived, also_archived):
        page.get_by_role("button", name=f"Archive {run.label}").click()
        expect(page.get_by_role("button", name=f"Archive {run.label}")).to_have_count(0)

    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    rows = page.locator("table.runs tbody tr")
    assert rows.count() == 1
    assert rows.first.get_by_role("link").inner_text() == "seed=1"
    note = page.locator("#archived-note")
    assert "2 archived runs hidden." in note.inner_text()
    assert page.locator(".badges").inner_text().strip() == "1 completed"
    page.screenshot(path=str(ARTIFACTS / "experiment-archived-hidden.png"), full_page=True)

    # The experiment list counts the same runs, and says how many are archived.
    page.goto(f"{page.base}/")
    row = page.locator("table.experiments tbody tr").first
    assert row.locator(".badge").all_text_contents() == ["1 completed", "2 archived"]
    page.get_by_label("Run status").select_option("completed")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**status=completed*")  # (the sort chosen beside the filters follows it)
    expect(page.locator("table.experiments tbody tr").first.get_by_role("link", name="seeds")).to_be_visible()
    page.goto(f"{page.base}/experiments/{experiment.pk}/")

    note.get_by_role("link", name="Show them").click()
    expect(rows).to_have_count(3)
    assert [row.locator(".badge", has_text="archived").count() for row in rows.all()] == [0, 1, 1]
    assert "Showing 2 archived runs too." in note.inner_text()

    note.get_by_role("link", name="restore on the runs table").click()
    expect(page.locator("#runs-table tbody tr")).to_have_count(2)
    page.get_by_role("button", name="Restore seed=2").click()
    expect(page.get_by_role("button", name="Restore seed=2")).to_have_count(0)
    page.goto(f"{page.base}/experiments/{experiment.pk}/")
    assert rows.count() == 2
    assert "1 archived run hidden." in note.inner_text()


def test_experiment_page_refuses_an_unknown_archived_choice(alice, alice_client):
    experiment = make_experiment(alice)
    response = alice_client.get(f"/experiments/{experiment.pk}/?archived=all")
    assert response.status_code == 400
    assert b"archived" in response.content
