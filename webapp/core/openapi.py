"""The API's OpenAPI 3.1 description, kept by hand in openapi.yaml next to this file."""

import functools
from pathlib import Path

import yaml

SCHEMA_PATH = Path(__file__).with_name("openapi.yaml")


@functools.cache
def document() -> dict:
    return yaml.safe_load(SCHEMA_PATH.read_text())
