"""Answers encoded by orjson read back as Django's encoder wrote them: same values, same datetime strings."""

import datetime
import decimal
import json
import math
import uuid

import numpy as np
from django.core.serializers.json import DjangoJSONEncoder
from django.utils.translation import gettext_lazy

from webapp.core.json_response import JsonResponse, dumps

UTC = datetime.UTC


def django_reading(data):
    return json.loads(json.dumps(data, cls=DjangoJSONEncoder))


def test_what_django_writes_its_own_way_reads_back_the_same():
    data = {
        "created_at": datetime.datetime(2026, 12, 4, 15, 21, 5, 123456, tzinfo=UTC),
        "whole_second": datetime.datetime(2026, 12, 4, 15, 21, 5, tzinfo=UTC),
        "elsewhere": datetime.datetime(
            2026, 12, 4, 15, 21, 5, 1000, tzinfo=datetime.timezone(datetime.timedelta(hours=2))
        ),
        "naive": datetime.datetime(2026, 12, 4, 15, 21, 5, 999999),
        "day": datetime.date(2026, 12, 4),
        "time": datetime.time(15, 21, 5, 250000),
        "price": decimal.Decimal("1.10"),
        "id": uuid.UUID(int=7),
        "lazy": gettext_lazy("run"),
        "nested": [{"step": 3, "value": 0.1, "key": "é/ünïcode \U0001f600"}, (1, 2)],
        7: "an int key",
        "wide": 2**64,  # beyond orjson: Django's encoder writes the document
    }
    assert json.loads(dumps(data)) == django_reading(data)
    assert json.loads(dumps({k: v for k, v in data.items() if k != "wide"})) == django_reading(
        {k: v for k, v in data.items() if k != "wide"}
    )


def test_non_finite_numbers_are_null_and_numpy_arrays_are_lists():
    data = {"value": [0.5, math.nan, math.inf, -math.inf, None], "array": np.array([1.5, 2.5])}
    assert json.loads(dumps(data)) == {"value": [0.5, None, None, None, None], "array": [1.5, 2.5]}


def test_the_response_is_json_with_its_status():
    response = JsonResponse({"error": "run not found"}, status=404)
    assert response.status_code == 404 and response["Content-Type"] == "application/json"
    assert json.loads(response.content) == {"error": "run not found"}
