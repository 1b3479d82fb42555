"""API answers as its OpenAPI document says, for the holes Schemathesis found: JSON 404s for any URL under
/api/, ids beyond 64 bits, 405 with Allow, bounds, and unknown metric keys."""

import json

import pytest

from tests.factories import make_run
from webapp.accounts.models import ApiToken
from webapp.core import openapi


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(alice, 'tests')[1]}"}


@pytest.mark.parametrize(
    "url",
    [
        "/api/runs/abc",
        "/api/runs/2.5/stop",
        "/api/experiments/-1",
        "/api/nothing",
        "/api/runs/99999999999999999999/metrics",
        "/api/runs/9223372036854775808",
        "/api",
    ],
)
def test_a_url_under_api_that_matches_nothing_is_a_json_404(client, auth, url):
    response = client.get(url, **auth)
    assert response.status_code == 404
    assert response["Content-Type"] == "application/json" and "error" in response.json()


def test_the_largest_id_is_a_plain_404(client, auth):
    response = client.get("/api/runs/9223372036854775807", **auth)
    assert response.status_code == 404 and response.json()["error"]


def test_a_host_this_server_does_not_answer_to_is_a_json_400_under_api_logged_in_one_line(client, auth):
    import logging
    import sys

    from webapp.core.server_errors import WithoutTraceback

    response = client.get("/api/runs/1", HTTP_HOST="evil.example", **auth)
    assert response.status_code == 400 and response["Content-Type"] == "application/json"
    assert response.json() == {"error": "Host: not a host this server answers to", "errors": {}}
    page = client.get("/runs/", HTTP_HOST="evil.example")
    assert page.status_code == 400 and page["Content-Type"].startswith("text/html")
    try:
        raise ValueError("boom")
    except ValueError:
        record = logging.LogRecord(
            "django.security.DisallowedHost", logging.ERROR, "", 0, "bad", (), sys.exc_info()
        )
    assert WithoutTraceback().filter(record) and record.exc_info is None


def test_pages_keep_their_html_404(alice_client):
    response = alice_client.get("/runs/99999999999999999999/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


@pytest.mark.parametrize("value", ["9223372036854775808", "1" + "0" * 30])
def test_an_experiment_filter_beyond_64_bits_is_a_400(client, auth, value):
    response = client.get(f"/api/runs?experiment={value}", **auth)
    assert response.status_code == 400
    assert "experiment" in response.json()["errors"]


@pytest.mark.parametrize(
    "query, field, message",
    [
        ("experiment=-1", "experiment", "must be at least 1"),
        ("page=0", "page", "must be at least 1"),
        ("page_size=201", "page_size", "must be at most 200"),
        ("page=1.0", "page", "must be a whole number, like 3"),
        ("q=" + "x" * 201, "q", "at most 200 characters, got 201"),
    ],
)
def test_a_runs_query_number_out_of_bounds_says_its_bound(client, auth, query, field, message):
    response = client.get(f"/api/runs?{query}", **auth)
    assert response.status_code == 400 and response.json()["errors"] == {field: message}


def test_an_experiment_name_of_the_wrong_type_says_so(client, auth):
    for name, message in ((5, "must be a string, got a number"), ("  ", "required: a non-empty string")):
        body = {"name": name, "env": {"name": "bandit"}}
        response = client.post("/api/experiments", json.dumps(body), content_type="application/json", **auth)
        assert response.status_code == 400 and response.json()["errors"] == {"name": message}


@pytest.mark.parametrize(
    "method, url, allowed",
    [
        ("put", "/api/experiments", "GET, POST, HEAD, OPTIONS"),
        ("put", "/api/runs/1", "GET, PATCH, DELETE, HEAD, OPTIONS"),
        ("get", "/api/runs/1/stop", "POST, OPTIONS"),
        ("head", "/api/runs/1/stop", "POST, OPTIONS"),
        ("patch", "/api/imports", "POST, OPTIONS"),
    ],
)
def test_405_says_which_methods_are_allowed(client, auth, method, url, allowed):
    response = getattr(client, method)(url, **auth)
    assert response.status_code == 405 and response["Allow"] == allowed


def test_head_answers_the_gets_status_and_headers_without_a_body(client, auth, alice):
    run = make_run(alice)
    url = f"/api/runs/{run.pk}/metrics?keys=train/success"
    got = client.get(url, **auth)
    head = client.head(url, **auth)
    assert head.status_code == 200 and head.content == b""
    assert head["Content-Type"] == got["Content-Type"]
    assert head["Content-Length"] == str(len(got.content))
    assert client.head("/api/runs/99999999", **auth).status_code == 404
    assert client.head(url).status_code == 401  # the same authentication as a GET


def test_options_says_what_the_resource_allows_without_authentication(client):
    response = client.options("/api/experiments")
    assert response.status_code == 204 and response["Allow"] == "GET, POST, HEAD, OPTIONS"
    assert client.options("/api/runs/1/stop")["Allow"] == "POST, OPTIONS"
    for public in ("/api/schema", "/healthz"):  # public ones too, and not their body
        answer = client.options(public)
        assert (answer.status_code, answer["Allow"], answer.content) == (204, "GET, HEAD, OPTIONS", b"")


def test_pages_answer_head(alice_client, alice):
    run = make_run(alice)
    for url in (
        f"/runs/{run.pk}/",
        "/import",
        f"/experiments/{run.experiment_id}/",
        "/api/schema",
        "/healthz",
    ):
        response = alice_client.head(url)
        assert response.status_code == 200, url


def test_unknown_metric_keys_come_back_as_empty_series_as_documented(client, auth, alice):
    run = make_run(alice)
    body = client.get(f"/api/runs/{run.pk}/metrics?keys=nope", **auth).json()
    assert body["series"] == {"nope": {"step": [], "value": [], "downsampled": False}}
    parameter = next(
        p
        for p in openapi.document()["paths"]["/api/runs/{pk}/metrics"]["get"]["parameters"]
        if p.get("name") == "keys"
    )
    assert "empty series" in parameter["description"]


@pytest.mark.parametrize(
    "query",
    # Spaces around the digits too (a fuzzer's " 10\n", an em space): the schema says integer.
    ["max_points=", "after=", "after=2147483648", "max_points=x", "max_points=%2010%0A", "after=%E2%80%831"],
)
def test_integer_parameters_present_but_not_integers_in_range_are_a_400(client, auth, alice, query):
    run = make_run(alice)
    assert client.get(f"/api/runs/{run.pk}/metrics?{query}", **auth).status_code == 400


def test_the_schema_states_the_bounds_the_server_enforces():
    paths = openapi.document()["paths"]
    parameters = {p.get("name"): p for p in paths["/api/runs/{pk}/metrics"]["get"]["parameters"]}
    assert parameters["after"]["schema"]["maximum"] == 2**31 - 1
    samples = {p.get("name"): p for p in paths["/api/runs/{pk}/samples"]["get"]["parameters"]}
    assert samples["step"]["schema"]["maximum"] == 2**31 - 1
    point = openapi.document()["components"]["schemas"]["MetricPoint"]
    assert point["properties"]["step"]["maximum"] == 2**31 - 1 and point["additionalProperties"] is False
    assert openapi.document()["components"]["schemas"]["Id"]["maximum"] == 2**63 - 1
    series = openapi.document()["components"]["schemas"]["Series"]
    assert "last value" in series["properties"]["value"]["description"]
    from webapp.experiments.specs import MAX_SEED, MAX_STEPS

    schemas = openapi.document()["components"]["schemas"]
    assert schemas["ExperimentFromPreset"]["allOf"][1]["properties"]["steps"]["maximum"] == MAX_STEPS
    seeds = schemas["ExperimentCommon"]["properties"]["seeds"]["oneOf"]
    assert seeds[0]["items"]["maximum"] == seeds[1]["maximum"] == MAX_SEED


def test_a_broken_multipart_body_is_a_json_400(client, auth):
    response = client.post("/api/imports", b"--x\r\n", content_type="multipart/form-data", **auth)
    assert response.status_code == 400 and "multipart" in response.json()["error"]
    assert json.loads(response.content)


@pytest.mark.parametrize("method", ["post", "patch"])
def test_a_body_beyond_the_servers_upload_limit_is_a_json_413_on_every_api(
    client, auth, alice, method, settings
):
    experiment = make_run(alice).experiment
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    url = "/api/experiments" if method == "post" else f"/api/experiments/{experiment.pk}"
    body = json.dumps({"name": "x", "description": "d" * 2000})
    response = getattr(client, method)(url, body, content_type="application/json", **auth)
    assert response.status_code == 413
    assert response.json()["errors"] == {"body": "larger than the server's limit of 1024 bytes"}
    experiment.refresh_from_db()
    assert experiment.description == ""


def test_a_description_beyond_its_limit_is_named(client, auth):
    from webapp.experiments.specs import MAX_DESCRIPTION

    body = {"name": "x", "env": {"name": "bandit"}, "description": "d" * (MAX_DESCRIPTION + 1)}
    response = client.post("/api/experiments", json.dumps(body), content_type="application/json", **auth)
    assert response.status_code == 400
    assert response.json()["errors"] == {"description": "at most 10,000 characters, got 10,001"}


def test_the_bearer_scheme_is_read_in_any_case_and_a_401_names_it(client, alice):
    token = ApiToken.issue(alice, "case")[1]
    assert client.get("/api/experiments", HTTP_AUTHORIZATION=f"bearer {token}").status_code == 200
    assert client.get("/api/experiments", HTTP_AUTHORIZATION=f"BEARER  {token}").status_code == 200
    for headers in ({}, {"HTTP_AUTHORIZATION": "Bearer nope"}):
        response = client.get("/api/experiments", **headers)
        assert response.status_code == 401 and response["WWW-Authenticate"] == 'Bearer realm="EchoLab API"'
    mlflow = client.get("/api/2.0/mlflow/experiments/get-by-name", {"experiment_name": "x"})
    assert mlflow.status_code == 401 and mlflow["WWW-Authenticate"] == 'Bearer realm="EchoLab API"'


@pytest.mark.parametrize(
    "changes, field, fragment",
    [
        ({"config": {}}, "config", "no env, model, rollout, algorithm, optim, schedule section"),
        ({"config": {"env": {"name": "bandit"}}}, "config", "no model, rollout, algorithm, optim, schedule"),
        ({"env": {"name": "bandit"}, "seeds": "1,,2"}, "seeds", "an empty seed between commas in '1,,2'"),
        ({"env": {"name": "bandit"}, "seeds": ",1"}, "seeds", "an empty seed between commas"),
        ({"env": {"name": "bandit"}, "seeds": "\u0663"}, "seeds", "is not a whole number"),
        (
            {"env": {"name": "bandit"}, "seeds": [1, "2"]},
            "seeds",
            "seeds[1]: expected a whole number, got the text",
        ),
        ({}, "env", 'required: an object like {"name": "frozenlake"'),
        ({"env": "bandit"}, "env", 'expected an object, got the text "bandit": write {"name": "bandit"}'),
        ({"env": ["bandit"]}, "env", "got a list"),
        ({"env": {"params": {}}}, "env", "got one without a name"),
        ({"env": {"name": 5}}, "env", "got one whose name is a number"),
    ],
)
def test_an_experiment_is_never_made_of_silent_defaults(client, auth, changes, field, fragment):
    from webapp.experiments.models import Experiment

    body = {"name": "x", **changes}
    response = client.post("/api/experiments", json.dumps(body), content_type="application/json", **auth)
    assert response.status_code == 400, response.content
    assert fragment in response.json()["errors"][field]
    assert not Experiment.objects.exists()


@pytest.mark.parametrize("steps", [99_999_999, 0])
def test_a_grid_value_beyond_the_steps_limits_is_named_under_grid(client, auth, steps):
    body = {"name": "x", "env": {"name": "bandit"}, "grid": {"schedule.steps": [1, steps]}}
    response = client.post("/api/experiments", json.dumps(body), content_type="application/json", **auth)
    assert response.status_code == 400
    assert response.json()["errors"] == {"grid": f"schedule.steps = {steps}: must be from 1 to 10000000"}


@pytest.mark.parametrize(
    "seed, answer, error",
    [(7, 201, None), (-1, 400, "-1 is not a whole number >= 0"), ("7", 400, "must be an integer, got str")],
)
def test_a_complete_config_without_seeds_runs_its_own_seed(client, auth, seed, answer, error):
    from tests.factories import trainer_config
    from webapp.experiments.models import Experiment

    body = {"name": "x", "config": {**trainer_config(), "seed": seed}}
    response = client.post("/api/experiments", json.dumps(body), content_type="application/json", **auth)
    assert response.status_code == answer, response.content
    if answer == 201:
        assert response.json()["seeds"] == [7] and Experiment.objects.get().runs.get().config["seed"] == 7
    else:
        assert response.json()["errors"] == {"config.seed": error}


def test_a_complete_config_of_no_steps_is_refused(client, auth):
    from tests.factories import trainer_config

    config = trainer_config()
    config["schedule"]["steps"] = 0
    body = {"name": "x", "config": config}
    response = client.post("/api/experiments", json.dumps(body), content_type="application/json", **auth)
    assert response.status_code == 400
    assert response.json()["errors"] == {"config.schedule.steps": "must be from 1 to 10000000"}


def test_more_query_parameters_than_django_parses_is_a_400_saying_so_logged_in_one_line(client, auth, alice):
    import logging

    from django.conf import settings

    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    run = make_run(alice)
    response = client.get(f"/api/runs/{run.pk}/metrics?" + "&".join(["key=a"] * (limit + 1)), **auth)
    assert response.status_code == 400 and response.json() == {
        "error": f"more than {limit:,} query parameters or form fields; the limit is {limit:,}: send fewer",
        "errors": {},
    }
    mlflow = client.get("/api/2.0/mlflow/runs/get?" + "&".join(["a=1"] * (limit + 1)), **auth)
    assert mlflow.status_code == 400 and mlflow.json()["error_code"] == "BAD_REQUEST"  # not INTERNAL_ERROR
    # Logged by django.security.TooManyFieldsSent: to the console in one line (pytest adds its own handlers)
    consoles = [h for h in logging.getLogger("django.security").handlers if type(h) is logging.StreamHandler]
    assert [type(f).__name__ for h in consoles for f in h.filters] == ["WithoutTraceback"]


def test_a_yaml_whose_aliases_multiply_it_is_refused_naming_the_field(client, auth):
    from webapp.experiments.models import Experiment

    lines, previous = ["a: &a [x, x, x, x, x, x, x, x, x]"], "a"
    for name in "bcdefghi":  # 9^9 values in 300 bytes: every check walked them one by one
        lines.append(f"{name}: &{name} [{', '.join([f'*{previous}'] * 9)}]")
        previous = name
    body = {"name": "x", "env": {"name": "bandit"}, "overrides": "\n".join(lines)}
    response = client.post("/api/experiments", json.dumps(body), content_type="application/json", **auth)
    assert response.status_code == 400
    assert "make it stand for more than 100,000 values" in response.json()["errors"]["overrides"]
    assert not Experiment.objects.exists()


def test_a_query_parameter_given_twice_is_refused_unless_it_is_a_list(client, auth, alice):
    """The view read only the last (?status=queued&status=running listed the running runs alone)."""
    response = client.get("/api/runs?status=queued&status=running", **auth)
    assert response.status_code == 400
    assert response.json()["errors"] == {"status": "given 2 times; give it once"}
    from tests.factories import streamed_run

    run = streamed_run(alice)
    # ?key= is a list, as ?runs= is on the compare API
    assert client.get(f"/api/runs/{run.pk}/metrics?key=a&key=b", **auth).status_code == 200
    assert client.get(f"/api/compare?runs={run.pk}&runs={run.pk}&key=a&key=b", **auth).status_code == 200
    answer = client.get(f"/api/runs/{run.pk}/metrics?key=a&after=1&after=2", **auth)
    assert answer.status_code == 400 and answer.json()["errors"] == {"after": "given 2 times; give it once"}
    assert client.get("/api/runs?status=queued&status=running").status_code == 401  # who asks comes first


@pytest.mark.parametrize(
    "url, name, takes",
    [
        (
            "/api/runs?stauts=queued",
            "stauts",
            "algorithm, archived, config, env, experiment, page, page_size, q, sort, status, tag",
        ),
        ("/api/experiments?zzz=1", "zzz", "page, page_size"),
    ],
)
def test_a_query_parameter_the_url_does_not_take_is_refused_naming_what_it_takes(
    client, auth, url, name, takes
):
    """A misspelt filter (?stauts=queued) listed every run, as if it had filtered."""
    response = client.get(url, **auth)
    assert response.status_code == 400
    path = url.split("?")[0]
    assert response.json()["errors"] == {name: f"not a parameter of GET {path} (it takes {takes})"}


def test_text_fields_the_server_refuses_nul_in_say_so_in_the_schema():
    """A fuzzer sent a NUL in a run's name and notes, which the schema allowed and the server refuses."""
    run_patch = openapi.document()["paths"]["/api/runs/{pk}"]["patch"]["requestBody"]["content"]
    fields = run_patch["application/json"]["schema"]["properties"]
    assert fields["name"]["pattern"] == fields["notes"]["pattern"] == "^[^\\u0000]*$"
