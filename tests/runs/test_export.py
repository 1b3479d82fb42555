"""GET /api/runs/<id>/export: all metrics as a streamed CSV or JSONL."""

import csv
import io
import json
import math

import pytest
from django.http import StreamingHttpResponse

from tests.factories import streamed_run
from webapp.metrics import export
from webapp.metrics.models import MetricPoint

URL = "/api/runs/{}/export"


def content(response) -> str:
    assert isinstance(response, StreamingHttpResponse)
    return b"".join(response.streaming_content).decode()


def fill(run):
    MetricPoint.upsert(
        run.pk,
        [
            (0, "train/success", 0.5),
            (0, "actor/grad_norm", 1.25),
            (1, "train/success", math.nan),
            (2, "actor/grad_norm", math.inf),
            (2, "train/success", None),
            (3, "val/success", -math.inf),
        ],
    )


def test_csv_has_a_step_column_and_one_column_per_key(alice_client, run):
    fill(run)
    response = alice_client.get(URL.format(run.pk), {"format": "csv"})
    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/csv")
    assert response["Content-Disposition"] == f'attachment; filename="run-{run.pk}-metrics.csv"'
    rows = list(csv.reader(io.StringIO(content(response))))
    assert rows == [
        ["step", "actor/grad_norm", "train/success", "val/success"],
        ["0", "1.25", "0.5", ""],
        ["1", "", "nan", ""],
        ["2", "inf", "nan", ""],  # a stored null is a NaN (SQLite stores every NaN so)
        ["3", "", "", "-inf"],
    ]


def test_jsonl_is_one_standard_json_object_per_step(alice_client, run):
    fill(run)
    response = alice_client.get(URL.format(run.pk), {"format": "jsonl"})
    assert response["Content-Type"] == "application/x-ndjson"
    text = content(response)
    assert "NaN," not in text.replace('"NaN"', "")  # no bare NaN token: every line is standard JSON
    lines = [json.loads(line, parse_constant=lambda token: pytest_fail(token)) for line in text.splitlines()]
    assert lines == [
        {"step": 0, "actor/grad_norm": 1.25, "train/success": 0.5},
        {"step": 1, "train/success": "NaN"},
        {"step": 2, "actor/grad_norm": "Infinity", "train/success": "NaN"},
        {"step": 3, "val/success": "-Infinity"},
    ]


def pytest_fail(token):
    raise AssertionError(f"non-standard JSON constant {token}")


def test_jsonl_export_can_be_ingested_back(alice_client, run, alice_token, alice):
    fill(run)
    copy = streamed_run(alice)
    points = [
        {"step": row["step"], "key": key, "value": value}
        for row in map(
            json.loads, content(alice_client.get(URL.format(run.pk), {"format": "jsonl"})).splitlines()
        )
        for key, value in row.items()
        if key != "step"
    ]
    response = alice_client.post(
        f"/api/runs/{copy.pk}/metrics",
        data=json.dumps(points),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {alice_token}",
    )
    assert response.status_code == 200

    def dump(r):
        return [
            (s, k, "nan" if v is None or math.isnan(v) else v)
            for s, k, v in MetricPoint.objects.filter(run=r)
            .order_by("step", "key")
            .values_list("step", "key", "value")
        ]

    assert dump(copy) == dump(run)


def test_empty_run_exports_a_header_only(alice_client, run):
    assert content(alice_client.get(URL.format(run.pk))) == "step\r\n"


def test_unknown_format_is_400(alice_client, run):
    response = alice_client.get(URL.format(run.pk), {"format": "xlsx"})
    assert (
        response.status_code == 400
        and response.json()["error"] == "format: must be one of csv, jsonl, got 'xlsx'"
    )


def test_another_users_run_is_404(bob_client, run):
    fill(run)
    assert bob_client.get(URL.format(run.pk)).status_code == 404


def exported_and_imported(client, run, token, fmt) -> int:
    """The id of the run that importing `run`'s export in `fmt` makes."""
    exported = content(client.get(URL.format(run.pk), {"format": fmt}))
    response = client.post(
        f"/api/imports?format={fmt}&name=again",
        data=exported,
        content_type="text/plain",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 201, response.content
    return response.json()["id"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_key_named_step_keeps_the_real_steps_and_the_file_imports_back(alice_client, run, alice_token, fmt):
    # Scripts log their step as a metric too (mlflow.log_metrics({"step": step, ...})).
    MetricPoint.upsert(run.pk, [(step, key, 7.0) for step in (0, 1, 2) for key in ("step", "loss")])
    copy = MetricPoint.objects.filter(run_id=exported_and_imported(alice_client, run, alice_token, fmt))
    assert sorted(copy.values_list("step", "key", "value")) == [
        (step, key, 7.0) for step in (0, 1, 2) for key in ("loss", "step (metric)")
    ]


def test_renamed_columns_stay_unique():
    assert export.key_columns(["a", "run", "run (metric)", "step"], ("run", "step")) == [
        "a",
        "run (metric) (metric)",
        "run (metric)",
        "step (metric)",
    ]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_keys_a_spreadsheet_or_a_stripped_header_would_misread_import_back(
    alice_client, run, alice_token, fmt
):
    keys = ["step", " step", "=HYPERLINK(1)", "'=x", "-loss", "loss"]
    MetricPoint.upsert(run.pk, [(1, key, float(i)) for i, key in enumerate(keys)])
    copy_id = exported_and_imported(alice_client, run, alice_token, fmt)
    copy = dict(MetricPoint.objects.filter(run_id=copy_id).values_list("key", "value"))
    # each value under its own key; only a key the reader cannot tell from "step" is renamed
    renamed = {"step": "step (metric)", " step": "step (metric) (metric)" if fmt == "csv" else " step"}
    assert copy == {renamed.get(key, key): float(i) for i, key in enumerate(keys)}
