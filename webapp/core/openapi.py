"""The API's OpenAPI 3.1 description, kept by hand in openapi.yaml next to this file."""

import functools
import re
from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).with_name("openapi.yaml")


def path_template(route: str) -> str:
    """The document's path for a Django route: "api/runs/<int:pk>/metrics" -> "/api/runs/{pk}/metrics"."""
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


@functools.cache
def document() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())


def _resolved(parameter: dict) -> dict:
    """A parameter as listed, or the one its $ref ("#/components/parameters/page") names."""
    ref = parameter.get("$ref")
    return document()["components"]["parameters"][ref.rsplit("/", 1)[1]] if ref else parameter


@functools.cache
def query_parameters(path: str, method: str) -> frozenset[str] | None:
    """The query parameters the document lists for `method` ("get") on `path` (a template such as
    "/api/runs/{pk}/metrics"); None for an operation it does not describe."""
    item = document()["paths"].get(path)
    if item is None or method not in item:
        return None
    listed = [*item.get("parameters", []), *item[method].get("parameters", [])]
    return frozenset(p["name"] for p in map(_resolved, listed) if p["in"] == "query")
