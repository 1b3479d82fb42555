"""No page shows template syntax as text: a Django comment or tag that does not parse (a `{# ... #}` over
two lines, a misspelt tag) is printed into the page as it is, where a person reads it."""

import re

import pytest

from tests.factories import make_event, points, spec_experiment, trained_run

TEMPLATE_SYNTAX = re.compile(r"\{#|#\}|\{%|%\}|\{\{|\}\}")


def visible_html(html: str) -> str:
    """The page less its <script> elements (page data as JSON may hold braces of its own)."""
    return re.sub(r"<script\b.*?</script>", "", html, flags=re.S)


@pytest.fixture
def pages(alice):
    experiment = spec_experiment(alice, "syntax check", seeds=[1])
    runs = [trained_run(experiment, f"seed={seed}", overrides={"seed": seed}) for seed in (1, 2)]
    for run in runs:
        points(run, "train/success", {step: step / 10 for step in range(10)})
    make_event(runs[0], 5, "warning")
    ids = ",".join(str(run.pk) for run in runs)
    return [
        "/",
        experiment.get_absolute_url(),
        runs[0].get_absolute_url(),
        f"/runs/{runs[0].pk}/trajectories",
        "/runs/",
        f"/compare?runs={ids}",
        "/compare/ablations",
        "/experiments/new",
        "/import",
        "/tokens",
    ]


def test_no_page_shows_template_syntax(alice_client, pages):
    for url in pages:
        response = alice_client.get(url, follow=True)
        assert response.status_code == 200, url
        found = TEMPLATE_SYNTAX.findall(visible_html(response.content.decode()))
        assert not found, f"{url} shows {found}"
