"""Every page and API view that loads a run by id goes through owned_run (the metrics ingest checks the same
scope in its write: tests/runs/test_metrics_ingest.py): another user's run is the same 404 as a run that
does not exist, an HTML page for pages and a JSON error under /api/."""

import re

import pytest
from django.urls import reverse

from tests.factories import make_run

PAGES = [
    ("GET", "run_detail"),
    ("GET", "run_trajectories"),
    ("GET", "run_edit"),
    ("POST", "run_stop"),
    ("POST", "run_resume"),
    ("POST", "run_archive"),
    ("POST", "run_restore"),
    ("POST", "run_delete"),
]
APIS = [
    ("GET", "api_run"),
    ("POST", "api_run_stop"),
    ("POST", "api_run_resume"),
    ("GET", "api_run_metrics"),
    ("GET", "api_run_export"),
    ("GET", "api_run_events"),
    ("GET", "api_run_samples"),
]
MISSING_ID = 2**62


def ask(client, method, name, pk):
    url = reverse(name, args=[pk])
    return client.get(url) if method == "GET" else client.post(url)


@pytest.mark.parametrize("method,name", PAGES)
def test_a_page_for_another_users_run_is_the_html_404_of_a_missing_run(bob_client, alice, method, name):
    theirs = ask(bob_client, method, name, make_run(alice).pk)
    missing = ask(bob_client, method, name, MISSING_ID)
    assert theirs.status_code == missing.status_code == 404
    assert theirs["Content-Type"].startswith("text/html")
    assert without_csrf_token(theirs.content) == without_csrf_token(missing.content)


def without_csrf_token(page: bytes) -> bytes:
    """The page less the CSRF token of its logout form, which differs per response."""
    return re.sub(rb'name="csrfmiddlewaretoken" value="[^"]*"', b"", page)


@pytest.mark.parametrize("method,name", APIS)
def test_an_api_view_for_another_users_run_is_the_json_404_of_a_missing_run(bob_client, alice, method, name):
    theirs = ask(bob_client, method, name, make_run(alice).pk)
    missing = ask(bob_client, method, name, MISSING_ID)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json() == missing.json() and theirs.json()["error"]


@pytest.mark.parametrize("method,name", PAGES + APIS)
def test_the_owner_gets_past_the_lookup(alice_client, alice, method, name):
    run = make_run(alice, status="stopped" if "resume" in name else "queued")  # only a stopped run resumes
    assert ask(alice_client, method, name, run.pk).status_code in (200, 302)
