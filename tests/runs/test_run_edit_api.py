"""PATCH /api/runs/<id>: a script renames, tags, annotates, archives and restores a run, with the checks of
the run's Edit page, all or nothing, and only those fields (a tester found no way to do it but the page)."""

import json

import pytest

from tests.factories import make_run
from webapp.experiments.models import Run


def patch(client, run, body, token):
    data = body if isinstance(body, str) else json.dumps(body)
    return client.patch(
        f"/api/runs/{run.pk}", data, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
    )


def test_a_script_renames_tags_annotates_archives_and_restores_a_run(client, alice, alice_token):
    run = make_run(alice, status=Run.Status.COMPLETED, tags=["old"])
    answer = patch(
        client, run, {"name": "lr 3e-4", "tags": ["Baseline", "paper"], "notes": "the paper's"}, alice_token
    )
    assert answer.status_code == 200, answer.json()
    assert (answer.json()["name"], answer.json()["tags"], answer.json()["notes"]) == (
        "lr 3e-4",
        ["baseline", "paper"],
        "the paper's",
    )
    assert patch(client, run, {"tags": ["a", "A", "b"]}, alice_token).json()["tags"] == ["a", "b"]
    assert patch(client, run, {"archived": True}, alice_token).json()["archived_at"] is not None
    answer = patch(client, run, {"archived": False}, alice_token)
    assert answer.json()["archived_at"] is None and answer.json()["name"] == "lr 3e-4"  # the rest kept


@pytest.mark.parametrize(
    "body, field, problem",
    [
        ({}, "body", "must be an object with any of name, tags, notes, archived"),
        ({"status": "completed"}, "status", "unknown field; only name, tags, notes, archived can change"),
        ({"name": 5}, "name", "must be a string, got a number"),
        ({"name": "x" * 201}, "name", "at most 200 characters, got 201"),
        ({"tags": ["a b"]}, "tags", "'a b' is not a tag"),  # one item, one tag: not split in two
        ({"tags": ["Bad!"]}, "tags", "'Bad!' is not a tag"),
        ({"tags": "a, b"}, "tags", 'must be a list of tags, like ["baseline", "sweep-3"], got a string'),
        ({"tags": [f"t{i}" for i in range(21)]}, "tags", "21 tags; a run has at most 20"),
        ({"archived": "yes"}, "archived", "must be true or false"),
        ({"name": "kept?", "archived": "yes"}, "archived", "must be true or false"),  # all or nothing
    ],
)
def test_a_bad_edit_names_its_field_and_changes_nothing(client, alice, alice_token, body, field, problem):
    run = make_run(alice, status=Run.Status.COMPLETED, name="before", tags=["old"])
    answer = patch(client, run, body, alice_token)
    assert answer.status_code == 400
    assert problem in answer.json()["errors"][field]
    run.refresh_from_db()
    assert (run.name, run.tags, run.archived_at) == ("before", ["old"], None)


def test_an_edit_leaves_what_the_worker_wrote_meanwhile(client, alice, alice_token):
    # The form saved the whole row as loaded: a step and heartbeat written between load and save went back.
    from webapp.runs.forms import RunEditForm

    run = make_run(alice, status=Run.Status.RUNNING, step=3)
    form = RunEditForm({"name": "renamed", "tags": "", "notes": ""}, instance=Run.objects.get(pk=run.pk))
    Run.objects.filter(pk=run.pk).update(step=9, status=Run.Status.COMPLETED)  # the worker, meanwhile
    assert form.is_valid()
    form.save()
    run.refresh_from_db()
    assert (run.name, run.step, run.status) == ("renamed", 9, Run.Status.COMPLETED)


def test_another_users_run_is_a_404_and_stays(client, alice, bob_token):
    run = make_run(alice, status=Run.Status.COMPLETED, name="alice's")
    assert patch(client, run, {"name": "bob's"}, bob_token).status_code == 404
    run.refresh_from_db()
    assert run.name == "alice's"
