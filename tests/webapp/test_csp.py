"""Content-Security-Policy on every page: scripts from our own origin only. The browser tests fail on
anything the policy blocks (the `page` fixture listens to chromium's console); here the header itself,
and the trajectories page working under it."""

import pytest
from django.urls import reverse

from tests.factories import make_run
from webapp.experiments.models import Run
from webapp.metrics.models import Sample


def directives(response) -> dict[str, list[str]]:
    header = response.headers["Content-Security-Policy"]
    return {part.split()[0]: part.split()[1:] for part in header.split(";") if part.strip()}


@pytest.mark.parametrize(
    "url",
    [
        "/accounts/login/",
        "/",
        "/experiments/new/",
        "/import",
        "/tokens/",
        "/compare/ablations",
        "/runs/{run}/",
        "/runs/{run}/trajectories",
        "/runs/999999/",
        "/api/runs",
    ],
)
def test_every_page_has_the_policy(alice_client, alice, url):
    run = make_run(alice)
    response = alice_client.get(url.format(run=run.pk))
    policy = directives(response)
    assert policy["script-src"] == ["'self'"]
    assert policy["default-src"] == ["'self'"] and policy["object-src"] == ["'none'"]
    assert policy["frame-ancestors"] == ["'none'"]


def test_no_page_needs_an_inline_script(alice_client, alice):
    """What the policy would block: a <script> with code in it (json_script data blocks are not run)."""
    import re

    run = make_run(alice)
    for url in ("/", "/experiments/new/", f"/runs/{run.pk}/", f"/runs/{run.pk}/trajectories", "/import"):
        html = alice_client.get(url).content.decode()
        for tag, body in re.findall(r"<script([^>]*)>(.*?)</script>", html, flags=re.S):
            assert "src=" in tag or 'type="application/json"' in tag, (url, tag, body[:80])


@pytest.mark.browser
@pytest.mark.slow
def test_the_trajectories_page_works_under_the_policy(page):
    run = make_run(page.user, status=Run.Status.COMPLETED)
    for step in (0, 5):
        Sample.objects.create(
            run=run,
            step=step,
            index=0,
            data={
                "turns": [{"think": f"thinking at {step}", "answer": "Right", "reward": 1.0}],
                "reward": 1.0,
            },
        )
    page.goto(f"{page.base}{reverse('run_trajectories', args=[run.pk])}")
    assert page.get_by_text("thinking at 5").is_visible()
    page.select_option("#step-select", "0")
    page.get_by_text("thinking at 0").wait_for()
    assert page.get_by_text("thinking at 0").is_visible()
