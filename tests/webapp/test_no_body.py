"""Calls that take no body (stop, resume, delete) refuse one, naming its first field, and do nothing: a
client that sends {"from_step": 5} to resume must not believe it was heard."""

import json

import pytest

from tests.factories import make_run
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Run

CALLS = {
    "stop": ("post", "/api/runs/{run}/stop", Run.Status.RUNNING),
    "resume": ("post", "/api/runs/{run}/resume", Run.Status.STOPPED),
    "delete a run": ("delete", "/api/runs/{run}", Run.Status.STOPPED),
    "delete an experiment": ("delete", "/api/experiments/{experiment}", Run.Status.STOPPED),
}


@pytest.mark.parametrize("call", CALLS)
def test_a_body_is_refused_naming_its_field_and_nothing_is_done(client, alice, call, purge_broker):
    method, path, status = CALLS[call]
    run = make_run(alice, status=status)
    url = path.format(run=run.pk, experiment=run.experiment_id)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(alice, 'script')[1]}"}
    send = getattr(client, method)

    response = send(url, json.dumps({"from_step": 5}), content_type="application/json", **auth)
    assert response.status_code == 400
    assert response.json()["error"] == f"from_step: {method.upper()} {url} takes no body; nothing was done"
    assert Run.objects.filter(pk=run.pk, status=status, stop_requested=False).exists()

    response = send(url, json.dumps([1]), content_type="application/json", **auth)
    assert response.status_code == 400 and response.json()["error"].startswith("body: ")
    response = send(url, "from_step=5", content_type="application/x-www-form-urlencoded", **auth)
    assert response.status_code == 400 and response.json()["error"].startswith("from_step: ")

    assert send(url, "{}", content_type="application/json", **auth).status_code in (
        200,
        204,
    )  # an empty object is none


def test_stop_with_no_body_or_null_is_done(client, alice):
    run = make_run(alice, status=Run.Status.RUNNING)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(alice, 'script')[1]}"}
    for nothing in ("", "null"):
        assert (
            client.post(
                f"/api/runs/{run.pk}/stop", nothing, content_type="application/json", **auth
            ).status_code
            == 200
        )
    assert Run.objects.get(pk=run.pk).stop_requested


def test_a_body_is_read_as_every_api_reads_one_whatever_its_type_says(client, alice):
    """A fuzzer's findings: a JSON body under curl's default form type was named by its whole text, a form
    in UTF-16 was a 400 naming nothing (with a traceback logged), and Content-Encoding was ignored."""
    import gzip

    run = make_run(alice, status=Run.Status.RUNNING)
    url = f"/api/runs/{run.pk}/stop"
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(alice, 'script')[1]}"}
    form = "application/x-www-form-urlencoded"

    response = client.post(url, '{"from_step": 5}', content_type=form, **auth)
    assert response.status_code == 400 and response.json()["errors"] == {
        "from_step": f"POST {url} takes no body; nothing was done"
    }
    response = client.post(url, "a=1", content_type=f"{form}; charset=utf-16", **auth)  # encoded so
    assert response.status_code == 400 and list(response.json()["errors"]) == ["body"]
    response = client.post(url, "", content_type=form, HTTP_CONTENT_ENCODING="br", **auth)
    assert response.status_code == 415
    assert not Run.objects.get(pk=run.pk).stop_requested
    # An empty body, gzipped, is no body.
    response = client.post(url, gzip.compress(b""), content_type=form, HTTP_CONTENT_ENCODING="gzip", **auth)
    assert response.status_code == 200 and Run.objects.get(pk=run.pk).stop_requested
