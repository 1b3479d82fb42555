"""The experiment list in chromium as a lab lead uses it to find one experiment among months of them:
how many match, sorted by a header click, the sort kept by the next filter and the next page."""

from datetime import timedelta

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from tests.factories import make_event, make_experiment, make_run
from webapp.experiments import views
from webapp.experiments.models import Experiment

pytestmark = [pytest.mark.browser]


def names(page) -> list[str]:
    return page.locator("#experiment-table tbody td[data-label=Name] a").all_inner_texts()


def test_sort_by_a_header_count_the_matches_and_keep_both_across_filters_and_pages(page, monkeypatch):
    # The list had neither: newest first only, and "Page 1 of 2" as the one hint of how many matched.
    monkeypatch.setattr(views, "PAGE_SIZE", 2)
    now = timezone.now()
    for age, name, collapsed in (
        (3, "Sokoban grid 10", 0),
        (2, "Bandit sweep", 2),
        (1, "sokoban grid 9", 1),
        (0, "FrozenLake seeds", 0),
    ):
        experiment = make_experiment(page.user, name=name)
        Experiment.objects.filter(pk=experiment.pk).update(created_at=now - timedelta(days=age))
        for seed in range(2):
            run = make_run(page.user, experiment=experiment, label=f"seed={seed}", status="completed")
            if seed < collapsed:
                make_event(run, 50, "collapse")

    page.goto(f"{page.base}/experiments/")
    expect(page.get_by_text("4 experiments", exact=True)).to_be_visible()
    assert names(page) == ["FrozenLake seeds", "sokoban grid 9"]  # newest first, as before
    expect(page.get_by_role("link", name="Older →")).to_be_visible()
    assert page.get_by_role("columnheader", name="Created").get_attribute("aria-sort") == "descending"

    page.get_by_role("link", name="Name", exact=True).click()
    assert names(page) == ["Bandit sweep", "FrozenLake seeds"]  # A to Z, case aside
    assert page.get_by_role("columnheader", name="Name").get_attribute("aria-sort") == "ascending"
    # The next page, no longer "Older →" (the words of the list by date): a page of names after these
    page.get_by_role("link", name="Next →").click()
    assert names(page) == ["sokoban grid 9", "Sokoban grid 10"]  # numbers read as numbers
    expect(page.get_by_role("link", name="← Previous")).to_be_visible()

    page.get_by_placeholder("Search by name").fill("sokoban")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("2 experiments", exact=True)).to_be_visible()
    assert names(page) == ["sokoban grid 9", "Sokoban grid 10"]  # still by name

    page.goto(f"{page.base}/experiments/")
    page.get_by_role("link", name="Collapses", exact=True).click()
    assert names(page) == ["Bandit sweep", "sokoban grid 9"]  # most runs collapsed first
    page.get_by_role("link", name="Collapses ▼").click()  # (its arrow says which way it sorts)
    assert names(page)[0] in ("Sokoban grid 10", "FrozenLake seeds")

    # A phone shows the rows as cards, without the headers: the sort is a field of the filters too
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{page.base}/experiments/?q=sokoban")
    sort = page.get_by_role("combobox", name="Sort")
    expect(sort.locator("option:checked")).to_have_text("Newest first")
    assert names(page) == ["sokoban grid 9", "Sokoban grid 10"]
    sort.select_option(label="Name, Z to A")
    page.get_by_role("button", name="Filter").click()
    assert names(page) == ["Sokoban grid 10", "sokoban grid 9"]
    expect(page.get_by_role("combobox", name="Sort").locator("option:checked")).to_have_text("Name, Z to A")
    assert page.evaluate("document.documentElement.scrollWidth") == 390
