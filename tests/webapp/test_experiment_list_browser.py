"""The experiment list in a real browser: every cell of a row spans the row, so the table's lines meet."""

import pytest

from tests.factories import spec_experiment
from webapp.experiments.models import Run

pytestmark = [pytest.mark.browser, pytest.mark.slow]


def test_runs_badges_sit_inside_a_cell_as_tall_as_its_row(page):
    experiment = spec_experiment(page.user, seeds=[1, 2, 3])
    first, second, _ = experiment.runs.order_by("id")
    Run.objects.filter(pk=first.pk).update(status="running")
    Run.objects.filter(pk=second.pk).update(status="failed")
    page.goto(f"{page.base}/")
    row = page.locator("table.experiments tbody tr").first
    assert row.locator(".badge").all_text_contents() == ["1 running", "1 queued", "1 failed"]
    row_box = row.bounding_box()
    for cell in row.locator("td").all():
        box = cell.bounding_box()
        assert (box["y"], box["height"]) == pytest.approx((row_box["y"], row_box["height"]), abs=1)


def test_on_a_phone_each_experiment_is_a_card_with_its_status_in_view(page):
    experiment = spec_experiment(page.user, seeds=[1, 2])
    Run.objects.filter(pk=experiment.runs.order_by("id").first().pk).update(status="running")
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(f"{page.base}/")
    card = page.locator("table.experiments tbody tr").first
    for badge in card.locator(".badge").all():  # in a table row they sat past the screen's right edge
        box = badge.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= 390
    runs = card.locator("td[data-label=Runs]")
    assert (
        page.evaluate("(cell) => getComputedStyle(cell, '::before').content", runs.element_handle())
        == '"Runs"'
    )
