"""Text no database or page can store (JSON and YAML can escape a lone surrogate, and NUL) is a 400 naming
where it is, in every API and in the form's YAML fields, and nothing is stored."""

import json

import pytest
from django.urls import reverse

from tests.webapp.forms import experiment_post
from webapp.accounts.models import ApiToken
from webapp.core import jsonsafe
from webapp.experiments.models import Experiment
from webapp.tracking.models import ExternalExperiment

LONE = "a\ud800b"


@pytest.fixture
def token(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(alice, 'tests')[1]}"}


def post_json(client, token, url, body):
    # json.dumps writes the lone surrogate as the escape \ud800, as any client that sends one does
    return client.post(url, json.dumps(body), content_type="application/json", **token)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"name": LONE}, "name"),
        ({"name": "a\x00b"}, "name"),  # Postgres text refuses NUL: it was a 500 there
        ({"description": LONE}, "description"),
        ({"description": "\x00"}, "description"),
        ({"overrides": {"rollout": {"think_prompt": "a\x00"}}}, "overrides.rollout.think_prompt"),
        ({"env": {"name": "bandit", "params": {"low_risk_name": LONE}}}, "env.params.low_risk_name"),
        ({"grid": {"env.params.low_risk_name": ["ok", LONE]}}, "grid.env.params.low_risk_name[1]"),
        ({"grid": {LONE: [1]}}, "grid.a\\ud800b"),
    ],
)
def test_the_experiments_api_names_the_text_and_stores_nothing(client, token, changes, field):
    body = {"name": "x", "env": {"name": "bandit"}, "model": "tiny", **changes}
    response = post_json(client, token, reverse("api_experiments"), body)
    assert response.status_code == 400, response.content
    assert list(response.json()["errors"]) == [field]
    assert "valid Unicode" in response.json()["error"]
    assert not Experiment.objects.exists()


def test_the_metrics_api_names_the_point(client, token, alice):
    from tests.factories import make_run

    run = make_run(alice)
    points = [{"step": 0, "key": "ok", "value": 1}, {"step": 1, "key": "ok", "value": 1, LONE: 1}]
    response = post_json(client, token, f"/api/runs/{run.pk}/metrics", points)
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["points[1].a\\ud800b"]


@pytest.mark.parametrize(
    "path, body",
    [
        ("experiments/create", {"name": LONE}),
        ("runs/create", {"experiment_id": "EXPERIMENT", "run_name": LONE}),
    ],
)
def test_the_mlflow_endpoint_answers_in_mlflows_shape(client, token, alice, path, body):
    experiment = ExternalExperiment.create(alice, "raw")
    body = {key: str(experiment.pk) if value == "EXPERIMENT" else value for key, value in body.items()}
    response = post_json(client, token, f"/api/2.0/mlflow/{path}", body)
    assert response.status_code == 400
    assert response.json()["error_code"] == "INVALID_PARAMETER_VALUE"
    assert "valid Unicode" in response.json()["message"]
    assert ExternalExperiment.objects.count() == 1


@pytest.mark.parametrize(
    "field, text, named",
    [
        ("overrides", 'rollout:\n  think_prompt: "a\\ud800b"\n', "rollout.think_prompt"),
        ("detector_overrides", '"\\ud800": {tolerance: 5}\n', "\\ud800"),
        ("grid", 'env.params.low_risk_name = "a\\ud800b", ok', "env.params.low_risk_name[0]"),
    ],
)
def test_a_yaml_escape_in_the_form_is_named_under_its_field(alice_client, field, text, named):
    response = alice_client.post(reverse("experiment_new"), experiment_post(**{field: text}))
    assert response.status_code == 400
    assert f"{named}: must be valid Unicode text" in response.content.decode()
    assert not Experiment.objects.exists()


def test_a_yaml_escape_in_an_imported_config_is_named(alice_client):
    text = 'env: {name: bandit, params: {low_risk_name: "a\\ud800b"}}\n'
    response = alice_client.post(reverse("experiment_import"), {"text": text})
    assert response.status_code == 400
    assert "env.params.low_risk_name: must be valid Unicode text" in response.content.decode()


def test_not_unicode_finds_keys_values_and_nested_items():
    assert jsonsafe.unstorable_text({"a": ["ok", {"b": LONE}]}) == "a[1].b"
    assert jsonsafe.unstorable_text([{LONE: 1}], "points") == "points[0].a\\ud800b"
    assert jsonsafe.unstorable_text(LONE) == ""
    assert jsonsafe.unstorable_text([LONE, {"b": LONE}], "x") == "x[0]"  # the first, in order
    assert jsonsafe.unstorable_text({"a": ["ok", "\U0001f680 \u202e"], "b": 1.5}) is None


@pytest.mark.parametrize("url", ["/api/2.0/mlflow/experiments/create", "/api/experiments"])
@pytest.mark.parametrize(
    "body, words",
    [
        # ED A0 80 is how a lone surrogate would be encoded if UTF-8 allowed it; it does not: not JSON text
        (
            b'{"name": "x\xed\xa0\x80", "env": {"name": "bandit"}}',
            ["not valid JSON", "can't decode byte 0xed"],
        ),
        # json.loads keeps the last value without a word: which one the client meant is unknown
        (b'{"name": "x", "env": {"name": "bandit", "name": "sokoban"}}', ['the key "name" appears twice']),
    ],
)
def test_a_body_no_parser_can_read_as_sent_is_refused_saying_why(client, token, alice, url, body, words):
    response = client.post(url, body, content_type="application/json", **token)
    assert response.status_code == 400
    message = response.json().get("message") or response.json()["error"]
    assert all(word in message for word in words), message
    assert not Experiment.objects.exists() and not ExternalExperiment.objects.exists()


def test_a_point_with_a_key_twice_is_named_by_its_place_in_the_batch(client, token, alice):
    from tests.factories import make_run

    run = make_run(alice)
    body = b'[{"step": 0, "key": "k", "value": 1}, {"step": 1, "key": "k", "value": 1, "value": 5}]'
    response = client.post(f"/api/runs/{run.pk}/metrics", body, content_type="application/json", **token)
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "points[1]": 'the key "value" appears twice in one object: send each key once'
    }


def test_a_query_that_is_not_utf8_is_refused_naming_the_parameter(client, token, alice):
    """Django read each such byte as U+FFFD: `?name=%ff` imported a run named "\ufffd" (a fuzzer's)."""
    from webapp.experiments.models import Run

    response = client.post(
        "/api/imports?name=%ff&format=csv", b"step,a\n0,1\n", content_type="text/csv", **token
    )
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "name": "not UTF-8 text: percent-encode the UTF-8 bytes of each character"
    }
    assert not Run.objects.exists()
    response = client.get("/api/runs?q=%ff%fe", **token)
    assert response.status_code == 400 and list(response.json()["errors"]) == ["q"]
    # UTF-8 percent-encoded is text, U+FFFD itself included
    assert client.get("/api/runs?q=%C3%A9t%C3%A9%EF%BF%BD", **token).status_code == 200


def test_the_readmes_curl_import_is_read_as_the_file_it_sends_not_as_a_form(client, token, alice):
    """README: `curl -H "Authorization: Bearer $TOKEN" --data-binary @metrics.csv ".../api/imports?format=csv&name=
    my-run"`. curl labels that body application/x-www-form-urlencoded; it was checked as a form, so a CSV
    holding "%ff" and a gzipped file (which the API reads as such) were refused: "body: not UTF-8 text:
    percent-encode the UTF-8 bytes of each character"."""
    import gzip

    form = "application/x-www-form-urlencoded"  # what curl -d / --data-binary sends without -H Content-Type
    for name, body in [
        ("percent", b"step,loss%ff\n0,1\n"),
        ("gzipped", gzip.compress(b"step,train/success\n0,0.5\n1,0.25\n")),
    ]:
        response = client.post(f"/api/imports?format=csv&name={name}", body, content_type=form, **token)
        assert response.status_code == 201, response.json()
    assert sorted(Experiment.objects.filter(owner=alice).values_list("name", flat=True)) == [
        "gzipped",
        "percent",
    ]


def test_a_page_or_form_that_is_not_utf8_is_a_400_page_naming_it_and_saves_nothing(alice_client, alice):
    from tests.factories import make_run

    run = make_run(alice, label="seed 0")
    response = alice_client.post(
        f"/runs/{run.pk}/edit", b"name=%ff%fe&tags=&notes=", content_type="application/x-www-form-urlencoded"
    )
    assert response.status_code == 400
    page = response.content.decode()
    assert "The field name: not UTF-8 text" in page and "Nothing was changed." in page
    run.refresh_from_db()
    assert run.name == ""
    response = alice_client.get("/runs/?q=%ff")
    assert response.status_code == 400 and "The parameter q: not UTF-8 text" in response.content.decode()


def test_a_form_is_read_for_utf8_no_further_than_the_fields_django_parses(settings):
    from webapp.core.utf8 import first_not_utf8

    settings.DATA_UPLOAD_MAX_NUMBER_FIELDS = 1000
    assert first_not_utf8(b"q=%C3%A9t%C3%A9&n=%ff", "body") == "n"
    assert first_not_utf8(b"%ff=1", "body") == "body"  # a name that is not text is not named
    assert first_not_utf8(b"&" * 4_000_000, "body") is None
    assert first_not_utf8(b"&" * 4_000_000 + b"a=%ff", "body") == "body"  # beyond the thousandth field
