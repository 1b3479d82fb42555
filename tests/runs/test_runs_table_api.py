"""GET /api/runs: the runs table as JSON, scoped to the caller, validated, matching its schema."""

from datetime import timedelta

import pytest
from django.utils import timezone

from tests.factories import table_run
from webapp.core import openapi
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint
from webapp.runs import table

URL = "/api/runs"


def test_lists_the_callers_runs_with_summary_and_queue_place(client, alice, bob, alice_token):
    done = table_run(alice, label="done", status=Run.Status.COMPLETED, tags=["keep"])
    MetricPoint.upsert(done.pk, [(0, "val/success", 0.5), (5, "val/success", 0.25)])
    now = timezone.now()
    waiting = table_run(alice, label="waiting", queued_at=now)
    table_run(bob, label="bobs", queued_at=now - timedelta(seconds=5))
    response = client.get(URL, {"sort": "name"}, HTTP_AUTHORIZATION=f"Bearer {alice_token}")
    assert response.status_code == 200
    body = response.json()
    assert body["count"] == 2 and body["page"] == 1 and body["page_size"] == 50
    first, second = body["results"]
    assert (first["id"], first["tags"], first["env"], first["algorithm"]) == (
        done.pk,
        ["keep"],
        "bandit",
        "ppo",
    )
    assert first["summary"] == {
        "final_val_success": 0.25,
        "best_val_success": 0.5,
        "final_train_success": None,
        "collapse_step": None,
        "duration_seconds": None,
    }
    assert first["queue_position"] is None
    assert (second["id"], second["queue_position"]) == (waiting.pk, 2)  # bob's queued run was sent first


def test_archived_runs_only_with_archived_true(alice_client, alice):
    table_run(alice, label="kept")
    table_run(alice, label="gone").archive()
    assert [r["label"] for r in alice_client.get(URL).json()["results"]] == ["kept"]
    archived = alice_client.get(URL, {"archived": "true"}).json()["results"]
    assert [r["label"] for r in archived] == ["gone"] and archived[0]["archived_at"]


@pytest.mark.parametrize(
    "query, field",
    [
        ({"sort": "nope"}, "sort"),
        ({"page_size": "0"}, "page_size"),
        ({"page": "x"}, "page"),
        ({"tag": " spaced"}, "tag"),
        ({"q": "x" * 201}, "q"),
        ({"env": ""}, "env"),
        ({"status": "queued\x00"}, "status"),
        ({"experiment": "0"}, "experiment"),
        ({"page": "1.0"}, "page"),
        ({"page_size": " 5"}, "page_size"),
        ({"config": [f"key{n}" for n in range(9)]}, "config"),
        ({"config": ["seed", "  "]}, "config"),
        ({"config": "a\x1fb"}, "config"),
        ({"config": "x" * 251}, "config"),
        ({"sort": "config: "}, "sort"),
        ({"sort": "-config:"}, "sort"),
        ({"sort": "config:" + "." * 130}, "sort"),  # 130 nested lookups: a RecursionError, a 500
        ({"config": "a" + ".a" * 32}, "config"),
    ],
)
def test_bad_parameters_are_400_naming_the_parameter(alice_client, query, field):
    response = alice_client.get(URL, query)
    assert response.status_code == 400
    body = response.json()
    assert list(body["errors"]) == [field] and body["error"].startswith(f"{field}: ")


def test_unauthenticated_is_401(client, db):
    assert client.get(URL).status_code == 401


def test_schema_declares_every_sort_the_table_has():
    schema = openapi.document()
    parameters = {p["name"]: p for p in schema["paths"]["/api/runs"]["get"]["parameters"] if "name" in p}
    columns, config = parameters["sort"]["schema"]["anyOf"]
    assert columns["enum"] == table.SORTS
    assert parameters["sort"]["schema"]["default"] == table.DEFAULT_SORT
    assert config["pattern"].startswith("^-?" + table.CONFIG_SORT)
    assert parameters["config"]["schema"]["maxItems"] == table.MAX_CONFIG_COLUMNS


def test_config_columns_answer_each_runs_value_and_sort_by_it(alice_client, alice):
    table_run(alice, label="trl", config={"learning_rate": "1e-05", "beta": 0.0})
    table_run(alice, label="ours", config={"optim": {"actor_lr": 0.0005}, "seed": 3})
    query = "config=learning_rate&config=optim.actor_lr&config=learning_rate&sort=-config:learning_rate"
    response = alice_client.get(f"{URL}?{query}")
    assert response.status_code == 200
    trl, ours = response.json()["results"]
    # given twice, one column; a run without the value answers null (and sorts last)
    assert (trl["label"], trl["config_columns"]) == (
        "trl",
        {"learning_rate": "1e-05", "optim.actor_lr": None},
    )
    assert (ours["label"], ours["config_columns"]) == (
        "ours",
        {"learning_rate": None, "optim.actor_lr": 0.0005},
    )
    assert alice_client.get(URL).json()["results"][0]["config_columns"] == {}
