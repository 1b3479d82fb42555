"""The OpenAPI document at /api/schema describes every /api/ URL the project routes."""

import re

from django.urls import URLPattern, URLResolver, get_resolver

from webapp.core import openapi


def api_routes(patterns=None, prefix=""):
    for pattern in patterns if patterns is not None else get_resolver().url_patterns:
        route = prefix + str(pattern.pattern)
        if isinstance(pattern, URLResolver):
            yield from api_routes(pattern.url_patterns, route)
        elif isinstance(pattern, URLPattern) and route.startswith("api/"):
            yield openapi.path_template(route)


def test_schema_is_openapi_json_and_public(client, db):
    response = client.get("/api/schema")
    assert response.status_code == 200 and response["Content-Type"] == "application/json"
    assert response.json()["openapi"].startswith("3.1")


# MLflow's REST API (webapp/tracking) is MLflow's to describe; docs/MLFLOW.md lists what EchoLab serves of it.
MLFLOW_PREFIX = "/api/2.0/mlflow/"


def test_every_api_url_is_in_the_schema_and_nothing_else(client, db):
    documented = set(client.get("/api/schema").json()["paths"])
    routed = {route for route in api_routes() if not route.startswith(MLFLOW_PREFIX)}
    assert any(route.startswith(MLFLOW_PREFIX) for route in api_routes())
    assert {"/api/experiments", "/api/runs/{pk}/metrics", "/api/runs/{pk}/stop"} <= routed
    assert routed - documented == set(), "routed but not documented"
    assert documented - routed == set(), "documented but not routed"


def test_every_schema_reference_resolves(client, db):
    schema = client.get("/api/schema").json()
    text = str(schema)
    for ref in set(re.findall(r"#/components/(\w+)/(\w+)", text)):
        assert ref[1] in schema["components"][ref[0]], ref


def test_no_key_of_the_document_is_left_without_a_value(client, db):
    # In a YAML flow mapping a comma ends the entry: `{description: Per bucket, only when downsampled}` made a
    # keyword "only when downsampled" of value null in two schemas.
    def keys_without_value(node, path):
        if isinstance(node, dict):
            for key, value in node.items():
                if value is None:
                    yield f"{path}/{key}"
                yield from keys_without_value(value, f"{path}/{key}")
        elif isinstance(node, list):
            for index, item in enumerate(node):
                yield from keys_without_value(item, f"{path}/{index}")

    assert list(keys_without_value(client.get("/api/schema").json(), "")) == []


# gunicorn's limit_request_line (webapp/core/gunicorn_conf.py): a longer request line is its 414.
REQUEST_LINE_LIMIT = 8190


def _longest_query_value(schema: dict) -> float:
    """The longest a parameter's value can be on the wire: a 4-byte UTF-8 character per allowed character,
    each byte percent-encoded as 3 (an unbounded text: no limit)."""
    if "enum" in schema:
        return max(len(str(value)) for value in schema["enum"])
    if "anyOf" in schema:
        return max(_longest_query_value(option) for option in schema["anyOf"])
    if schema.get("type") == "integer":
        return 20
    if schema.get("type") == "array":
        return schema.get("maxItems", float("inf")) * (_longest_query_value(schema["items"]) + 100)
    return schema.get("maxLength", float("inf")) * 12


def test_an_operation_whose_query_can_outgrow_the_request_line_documents_the_414(client, db):
    # ?config= eight times (GET /api/runs) or ?overrides= (detector-inputs) within their schema's bounds made
    # a request line over 8,190 bytes: gunicorn's 414, which these operations did not list
    schema = client.get("/api/schema").json()
    parameters = schema["components"]["parameters"]
    missing = []
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            listed = [
                parameters[p["$ref"].rsplit("/", 1)[1]] if "$ref" in p else p
                for p in operation.get("parameters", [])
            ]
            longest = sum(
                len(p["name"]) + 2 + _longest_query_value(p.get("schema", {}))
                for p in listed
                if p["in"] == "query"
            )
            if longest + len(path) > REQUEST_LINE_LIMIT and "414" not in operation["responses"]:
                missing.append(f"{method.upper()} {path}")
    assert missing == []


def test_every_operation_documents_the_400_it_answers_to_a_parameter_it_does_not_take(client, alice):
    # GET /api/runs/{pk}?bogus=1 is a 400 naming `bogus` (as every operation answers), which five operations
    # that take no query parameter did not list: their documented answers were 200, 401 and 404 only.
    from tests.factories import make_run
    from webapp.accounts.models import ApiToken

    run = make_run(alice, status="completed")
    token = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(alice, 'schema')[1]}"}
    schema = client.get("/api/schema").json()
    answered = {}
    for path, item in schema["paths"].items():
        pk = run.experiment_id if path.startswith("/api/experiments/") else run.pk
        url = path.replace("{pk}", str(pk)) + "?bogus=1"
        for method, operation in item.items():
            if method not in ("get", "post", "patch", "delete"):
                continue
            response = getattr(client, method)(url, content_type="application/json", **token)
            answered[f"{method.upper()} {path}"] = (response.status_code, sorted(operation["responses"]))
            assert response.status_code == 400 and response.json()["errors"].keys() == {"bogus"}, path
    assert {name: codes for name, (status, codes) in answered.items() if str(status) not in codes} == {}
