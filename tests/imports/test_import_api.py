"""POST /api/imports: the same import as the page, for scripts (multipart or the raw file as the body)."""

import gzip
import json
import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile

from diagnostics.detector import Detector
from tests.factories import streamed_run
from tests.helpers import REPO_ROOT
from webapp.accounts.models import ApiToken
from webapp.alerts.models import DetectorEvent
from webapp.core import jsonsafe
from webapp.core.jsonsafe import jsonb_safe
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint

DATA = REPO_ROOT / "tests" / "data" / "detector"
URL = "/api/imports"


@pytest.fixture
def auth(alice):
    return {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(alice, 'script')[1]}"}


def nothing_saved():
    return [model.objects.count() for model in (Experiment, Run, MetricPoint, DetectorEvent)] == [0, 0, 0, 0]


def test_multipart_upload_creates_the_run(client, auth, alice):
    path = DATA / "sokoban-ppo-s0.csv"
    upload = SimpleUploadedFile(path.name, path.read_bytes())
    response = client.post(URL, {"file": upload, "name": "sokoban"}, **auth)
    assert response.status_code == 201, response.content
    body = response.json()
    run = Run.objects.get(pk=body["id"])
    assert body["url"] == run.get_absolute_url()
    assert run.experiment.owner == alice and run.experiment.name == "sokoban" and run.experiment.imported
    assert body["points"] == MetricPoint.objects.filter(run=run).count() > 0
    assert body["events"] == run.events.count() > 0
    assert body["steps"] == len(path.read_text().strip().splitlines()) - 1
    header = path.read_text().splitlines()[0].split(",")  # every metric but the reply length is read
    assert body["detector_keys"] == sorted(set(header) - {"step", "response/tokens_mean"})
    # When it trained is not in the file: no duration (it read "0s") and no steps per hour.
    listed = client.get("/api/runs", {"experiment": run.experiment_id}, **auth).json()
    [row] = listed["results"]
    assert row["summary"]["duration_seconds"] is None


def test_a_compressed_file_without_a_name_is_named_as_its_file_less_both_suffixes(client, auth):
    upload = SimpleUploadedFile("imp.csv.gz", gzip.compress(b"step,train/success\n0,0.5\n1,0.6\n"))
    response = client.post(URL, {"file": upload}, **auth)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.experiment.name, run.label) == ("imp", "imported: imp.csv.gz")


def test_raw_body_with_format_and_name(client, auth):
    body = b'{"step": 0, "train/success": 0.5}\n{"step": 1, "train/success": "NaN"}\n'
    response = client.post(f"{URL}?format=jsonl&name=mine", body, content_type="application/x-ndjson", **auth)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert (run.experiment.name, run.label, run.step) == ("mine", "imported: mine.jsonl", 2)  # steps 0 and 1
    assert run.latest_metrics == {"train/success": None}  # NaN is kept as a point, null in JSON


def test_bad_raw_body_is_a_400_naming_the_line_and_column(client, auth):
    response = client.post(
        f"{URL}?format=csv&name=x", b"step,a\n0,1\n1,oops\n", content_type="text/csv", **auth
    )
    assert response.status_code == 400
    assert response.json()["error"] == "file: x.csv: line 3, column 'a': 'oops' is not a number"
    assert "file" in response.json()["errors"]
    assert nothing_saved()


@pytest.mark.parametrize("body", [b'{"step": 0}\n{"step": 1}\n', b'{"step": 0, "a": null}\n'])
def test_steps_without_a_metric_value_are_refused(client, auth, body):
    response = client.post(f"{URL}?format=jsonl&name=x", body, content_type="text/plain", **auth)
    assert response.status_code == 400, response.content
    assert response.json()["errors"]["file"].startswith("x.jsonl: no metric values")
    assert nothing_saved()


@pytest.mark.parametrize("fmt", ["xlsx", ""])
def test_unknown_format_is_refused(client, auth, fmt):
    response = client.post(f"{URL}?format={fmt}", b"step,a\n0,1\n", content_type="text/csv", **auth)
    assert response.status_code == 400 and response.json()["error"].startswith("format: must be csv or jsonl")
    assert nothing_saved()


def test_a_multipart_import_takes_one_file_and_a_named_format(client, auth):
    upload = lambda: SimpleUploadedFile("m.csv", b"step,a\n0,1\n")  # noqa: E731
    response = client.post(URL, {"file": [upload(), upload()]}, **auth)
    assert response.status_code == 400 and response.json()["errors"] == {"file": "one file per import, got 2"}
    response = client.post(URL, {"file": upload(), "format": ""}, **auth)
    assert response.status_code == 400 and response.json()["error"].startswith("format: must be csv or jsonl")
    # A raw body's parameters in the address, or a field no import has: named, not dropped
    response = client.post(f"{URL}?name=from-the-address", {"file": upload()}, **auth)
    assert response.json()["error"] == (
        "name: a multipart import takes its fields in the form, not the address"
    )
    response = client.post(URL, {"file": upload(), "experiment": "7"}, **auth)
    assert response.json()["error"] == "experiment: not a field of an import (it takes file, name, format)"
    response = client.post(URL, {"file": upload(), "name": "\ufffd"}, **auth)  # what a byte 0xff reads as
    assert response.status_code == 400 and response.json()["errors"]["name"].startswith("not UTF-8 text")
    response = client.post(URL, {"file": upload(), "name": ["a", "b"]}, **auth)  # was named "b" silently
    assert response.status_code == 400 and response.json()["error"] == "name: given 2 times; give it once"
    assert nothing_saved()


def test_raw_body_over_the_limit_is_a_413(client, auth, settings):
    settings.IMPORT_MAX_BYTES = 64
    response = client.post(f"{URL}?format=csv", b"step,a\n" + b"0,1\n" * 40, content_type="text/csv", **auth)
    assert response.status_code == 413 and "over the limit of 64" in response.json()["error"]
    assert nothing_saved()
    upload = SimpleUploadedFile("m.csv", b"step,a\n" + b"0,1\n" * 40)  # the same file as a form's part
    response = client.post(URL, {"file": upload}, **auth)
    assert response.status_code == 413 and response.json()["errors"] == {
        "file": "m.csv: 167 bytes (0.0 MB), over the limit of 64 bytes (0.0 MB)"
    }
    assert nothing_saved()


def test_needs_authentication(client, db):
    response = client.post(f"{URL}?format=csv", b"step,a\n0,1\n", content_type="text/csv")
    assert response.status_code == 401
    assert nothing_saved()


def test_imported_run_is_not_visible_to_another_user(client, auth, bob):
    created = client.post(f"{URL}?format=csv", b"step,a\n0,1\n", content_type="text/csv", **auth).json()
    bob_auth = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(bob, 'script')[1]}"}
    assert client.get(f"/api/runs/{created['id']}", **bob_auth).status_code == 404
    assert client.get(f"/api/runs/{created['id']}", **auth).status_code == 200


def test_raw_body_as_curl_sends_it(client, auth):
    """curl --data-binary @metrics.csv labels the body as a form; it is still the file."""
    response = client.post(
        f"{URL}?format=csv&filename=metrics.csv",
        b"step,a\n0,1\n1,2\n",
        content_type="application/x-www-form-urlencoded",
        **auth,
    )
    assert response.status_code == 201, response.content
    assert Run.objects.get().label == "imported: metrics.csv"
    assert MetricPoint.objects.count() == 2


@pytest.mark.parametrize(
    "fmt, body, message",
    [
        (
            "jsonl",
            b'{"step": 0, "a": 1}\n{"step": 1, "a": 1' + b"0" * 400 + b"}\n",
            "line 2, column 'a': an integer of 401 digits is too large",
        ),
        (
            "jsonl",
            b'{"step": 0, "a": 1}\n{"step": 1, "a": ' + b"9" * 5000 + b"}\n",
            "line 2, column 'a': an integer of 5000 digits is too large",
        ),
        (
            "jsonl",
            b'{"step": 0, "a\\u0000b": 1}\n',
            "line 1, column 'a\\x00b': the name must not contain NUL",
        ),
        (
            "jsonl",
            b'{"step": 0, "a": 1}\n{"step": 1, "\\ud800": 1}\n',
            "line 2, column '\\ud800': the name must be valid Unicode text",
        ),
        ("jsonl", b'{"step": 0, "": 1}\n', "line 1, column '': the name must not be empty"),
        ("jsonl", b'{"step": 0, " ": 1}\n', "line 1, column ' ': the name must not be empty"),
        (
            "jsonl",
            b'{"step": 0, "a": 1}\n{"step": 1, "a": ' + b"[" * 100_000 + b"]" * 100_000 + b"}\n",
            "line 2: not JSON (nested too deeply)",
        ),
        ("jsonl", b'{"step": ' + b"9" * 400 + b', "a": 1}\n', "line 1: step 9999"),
        (  # the first too large in the file, named by its line, not the largest
            "csv",
            b"step,a\n0,1\n99999999999999999999,1\n1e30,1\n",
            "line 3: step 99999999999999999999 is larger than the largest step, 2147483647",  # as written
        ),
        ("csv", b"step,a\n0,1\n1," + b"7" * 140_000 + b"\n", "line 3: field larger than field limit"),
    ],
)
def test_hostile_files_are_a_400_naming_the_line_and_nothing_is_saved(client, auth, fmt, body, message):
    response = client.post(f"{URL}?format={fmt}&name=x", body, content_type="text/plain", **auth)
    assert response.status_code == 400, response.content
    assert message in response.json()["error"]
    assert nothing_saved()


LONG = "x" * 300_000


@pytest.mark.parametrize(
    "query, body",
    [
        ("format=jsonl", f'{{"step": 0, "a": "{LONG}"}}\n'),  # a value
        ("format=jsonl", f'{{"step": "{LONG}", "a": 1}}\n'),  # a step
        ("format=jsonl", f'{{"step": 0, "{LONG[:100_000]}": "?"}}\n'),  # a name, in each message's prefix
        ("format=jsonl", f'{{"step": 1{"0" * 400}, "a": 1}}\n'),  # a step too large
        ("format=jsonl", f'{{"step": -1{"0" * 400}, "a": 1}}\n'),  # a step below 0
        ("format=csv", f"step,{LONG[:100_000]},{LONG[:100_000]}\n0,1,2\n"),  # a name twice
        ("format=csv", f"{LONG[:100_000]}\n0\n"),  # no step column: the columns listed
        ("format=csv", f"step,a\n0,{LONG[:100_000]}\n"),  # a cell
        (f"format={LONG[:5_000]}", "step,a\n0,1\n"),  # the format
    ],
)
def test_a_message_quotes_at_most_100_characters_of_a_value(client, auth, query, body):
    response = client.post(f"{URL}?{query}&name=x", body.encode(), content_type="text/plain", **auth)
    assert response.status_code == 400, response.content[:300]
    message = response.json()["error"]
    assert "…" in message and "x" * 101 not in message and "0" * 101 not in message
    assert len(message) < 400
    assert nothing_saved()


def test_import_and_ingest_share_one_key_rule(client, auth, alice):
    """A name one refuses, the other refuses too."""
    import json

    run = streamed_run(alice)
    for key in ("", "  ", "a\u0000", "\ud800"):
        line = json.dumps({"step": 0, key: 1}).encode()
        imported = client.post(f"{URL}?format=jsonl&name=x", line, content_type="text/plain", **auth)
        assert imported.status_code == 400, key
        point = json.dumps([{"step": 0, "key": key, "value": 1}])
        ingest = client.post(f"/api/runs/{run.pk}/metrics", point, content_type="application/json", **auth)
        assert ingest.status_code == 400, key
    assert Run.objects.count() == 1 and MetricPoint.objects.count() == 0


def test_a_value_ingest_takes_imports_back_from_its_export(client, auth, alice):
    """success_rate (RAGEN's name for train/success) is a fraction wherever it comes in: the ingest API took
    50 under it, and its own export then failed to import."""
    import json

    run = streamed_run(alice)
    url = f"/api/runs/{run.pk}/metrics"
    for value, status in ((50, 400), (0.5, 200)):
        point = json.dumps([{"step": 3, "key": "success_rate", "value": value}])
        response = client.post(url, point, content_type="application/json", **auth)
        assert response.status_code == status, response.content
    assert response.status_code == 200
    exported = client.get(f"/api/runs/{run.pk}/export?format=jsonl", **auth)
    body = b"".join(exported.streaming_content) if exported.streaming else exported.content
    imported = client.post(f"{URL}?format=jsonl&name=back", body, content_type="text/plain", **auth)
    assert imported.status_code == 201, imported.content


def test_import_and_ingest_share_one_value_rule(client, auth, alice):
    """A JSON string is a value for both (NaN, Infinity, -Infinity) or for neither."""
    run = streamed_run(alice)
    for value in ("NaN", "Infinity", "-Infinity", "1.5", "nan", "-inf", "inf", ""):
        line = json.dumps({"step": 0, "a": value}).encode()
        imported = client.post(f"{URL}?format=jsonl&name=x", line, content_type="text/plain", **auth)
        point = json.dumps([{"step": 0, "key": "a", "value": value}])
        ingest = client.post(f"/api/runs/{run.pk}/metrics", point, content_type="application/json", **auth)
        assert (imported.status_code, ingest.status_code) in ((201, 200), (400, 400)), value
        assert imported.status_code == (201 if value in ("NaN", "Infinity", "-Infinity") else 400), value


def test_the_same_bytes_imported_again_name_the_earlier_run(client, auth, bob):
    def post(body):
        response = client.post(f"{URL}?format=csv", body, content_type="text/csv", **auth)
        assert response.status_code == 201, response.content
        return response.json()

    body = b"step,train/success\n0,0.1\n1,0.2\n2,0.3\n"
    first = post(body)
    assert first["duplicate_of"] == []
    second = post(body)
    assert second["duplicate_of"] == [{"id": first["id"], "url": first["url"]}]
    assert post(body + b"3,0.4\n")["duplicate_of"] == []
    # Another user's import of the same bytes is none of this user's business.
    bob_auth = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(bob, 'script')[1]}"}
    response = client.post(f"{URL}?format=csv", body, content_type="text/csv", **bob_auth)
    assert response.json()["duplicate_of"] == []


def post_raw(client, auth, body: bytes, encoding: str, query="format=csv&name=x"):
    return client.post(
        f"{URL}?{query}", body, content_type="text/csv", HTTP_CONTENT_ENCODING=encoding, **auth
    )


def test_a_gzip_body_is_imported_and_another_encoding_is_a_415(client, auth, settings):
    csv = b"step,train/success\n0,0.1\n1,0.3\n"
    response = post_raw(client, auth, gzip.compress(csv), "gzip")
    assert response.status_code == 201, response.content
    assert response.json()["points"] == 2
    response = post_raw(client, auth, csv, "br")
    assert response.status_code == 415
    assert response.json()["errors"] == {
        "Content-Encoding": "'br' is not supported; send the body as it is or gzip-compressed"
    }
    settings.IMPORT_MAX_BYTES = 64  # the limit is on the file, not on what was sent
    response = post_raw(client, auth, gzip.compress(b"step,a\n" + b"0,1\n" * 40), "gzip")
    assert response.status_code == 413 and "more than 64 bytes once gunzipped" in response.json()["error"]
    assert Run.objects.count() == 1


def test_a_file_name_holding_nul_is_refused(client, auth):
    response = post_raw(client, auth, b"step,a\n0,1\n", "", query="format=csv&name=n&filename=a%00b.csv")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["filename"]
    assert nothing_saved()


def test_a_file_name_longer_than_an_upload_keeps_is_refused_not_cut(client, auth):
    # 400 characters were kept as the first 251 and ".csv" in the run's label, without a word
    response = post_raw(client, auth, b"step,a\n0,1\n", "", query=f"format=csv&filename={'a' * 396}.csv")
    assert response.status_code == 400
    assert response.json()["errors"] == {"filename": "at most 255 characters, got 400"}
    assert nothing_saved()
    response = post_raw(client, auth, b"step,a\n0,1\n", "", query=f"format=csv&filename={'a' * 251}.csv")
    assert response.status_code == 201, response.content
    assert Run.objects.get().label == f"imported: {'a' * 251}.csv"


def test_a_long_name_without_a_file_name_is_refused_naming_the_name(client, auth):
    # the file name defaults to the name: a name too long was reported as a file name the script never sent
    response = post_raw(client, auth, b"step,a\n0,1\n", "", query=f"format=csv&name={'n' * 260}")
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["name"]
    assert nothing_saved()


@pytest.mark.parametrize("query", ["name=%20%20%20", "name=", "", "name=%20&filename=%20"])
def test_a_blank_name_is_no_name(client, auth, query):
    """As on the form: the experiment is named after the file, here the raw body's default."""
    response = post_raw(client, auth, b"step,a\n0,1\n", "", query=f"format=csv&{query}")
    assert response.status_code == 201, response.content
    run = Run.objects.get()
    assert (run.experiment.name, run.label) == ("metrics", "imported: metrics.csv")


def test_a_blank_file_name_on_a_multipart_upload_is_no_name(client, auth):
    upload = SimpleUploadedFile("  .csv", b"step,a\n0,1\n")
    response = client.post(URL, {"file": upload, "name": " "}, **auth)
    assert response.status_code == 201, response.content
    assert Run.objects.get().experiment.name == "metrics"


def test_a_name_holding_nul_is_refused_naming_it(client, auth):
    response = post_raw(client, auth, b"step,a\n0,1\n", "", query="format=csv&name=a%00b")
    assert response.status_code == 400
    assert response.json()["errors"] == {"name": jsonsafe.UNSTORABLE_TEXT}
    assert nothing_saved()


def test_a_trl_trainer_state_and_a_gzip_csv_upload_become_runs_with_our_names(client, auth):
    state = {
        "global_step": 2,
        "log_history": [
            {"epoch": 0.5, "loss": 0.7, "reward": 0.25, "reward_std": 0.5, "step": 1},
            {"epoch": 0.5, "eval_loss": 0.9, "step": 1},
            {"epoch": 1.0, "loss": 0.6, "reward": 0.5, "reward_std": 0.4, "step": 2},
        ],
    }
    upload = SimpleUploadedFile("trainer_state.json", json.dumps(state, indent=2).encode())
    response = client.post("/api/imports", {"file": upload}, **auth)
    assert response.status_code == 201, response.json()
    run = Run.objects.get(pk=response.json()["id"])
    assert run.latest_metrics["train/reward_mean"] == 0.5 and run.latest_metrics["eval_loss"] == 0.9
    assert response.json()["steps"] == 2
    assert (run.step, run.total_steps) == (2, 2)  # global_step counts from 1: steps 1-2 are 2, not 3

    upload = SimpleUploadedFile("metrics.csv.gz", gzip.compress(b"step,train/success\n0,0.1\n1,0.2\n"))
    response = client.post("/api/imports", {"file": upload}, **auth)
    assert response.status_code == 201, response.json()
    assert Run.objects.get(pk=response.json()["id"]).latest_metrics == {"train/success": 0.2}


def test_a_name_that_already_ends_with_the_format_is_not_given_it_twice(client, auth):
    body = b"step,train/success\n0,0.5\n1,x\n"
    answer = client.post(f"{URL}?format=csv&name=bad.csv", body, content_type="text/csv", **auth)
    assert answer.json()["errors"]["file"].startswith("bad.csv: line 3")


def test_values_too_large_for_the_detectors_arithmetic_are_imported_and_judged(client, auth):
    """1e155 squared overflows: the import's detector pass raised and the import was a 500."""
    rows = [f"{step},1.0,{1e155 if step > 11 else 1.0},{1.7e308 * (-1) ** step}" for step in range(32)]
    body = ("step,train/success,actor/entropy,actor/grad_norm\n" + "\n".join(rows) + "\n").encode()
    response = client.post(f"{URL}?format=csv&name=huge", body, content_type="text/csv", **auth)
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    assert run.metric_points.filter(key="actor/entropy", value=1e155).count() == 20


def test_an_import_that_logged_its_step_times_has_a_duration_and_a_pace(client, auth, alice, alice_client):
    from webapp.compare.aggregates import steps_per_hour

    body = "step,train/success,time/step_s\n0,0.1,30\n1,0.2,45\n2,0.3,nan\n3,0.4,45\n"
    response = client.post(f"{URL}?format=csv&name=timed", body, content_type="text/csv", **auth)
    run = Run.objects.get(pk=response.json()["id"])
    assert run.training_time.total_seconds() == 120  # the steps' logged seconds; not the time of the import
    assert steps_per_hour(run) == 4 / (120 / 3600)
    row = alice_client.get("/runs/").content.decode()
    cells = re.findall(r'<td data-col="duration"[^>]*>(.*?)</td>', row, re.S)
    assert [" ".join(cell.split()) for cell in cells] == ["2m 00s"], cells
    assert 'Duration</dt><dd id="run-duration">2m 00s (its steps\' logged times)' in alice_client.get(
        run.get_absolute_url()
    ).content.decode().replace("&#x27;", "'")
    untimed = client.post(
        "/api/imports?format=csv&name=u", "step,loss\n0,1\n", content_type="text/csv", **auth
    )
    run = Run.objects.get(pk=untimed.json()["id"])
    assert run.training_time is None and steps_per_hour(run) is None


def test_the_events_of_an_import_are_stored_in_a_few_queries(client, auth, django_assert_max_num_queries):
    # A file that makes an event every few steps: each stored with its own get_or_create took 16 s of a 27 s
    # import of 60,000 rows (2,396 events); a 50 MB file of them would hold the request for many minutes
    rows = ["step,train/success,train/reward_mean,actor/entropy,actor/grad_norm"]
    rows += [f"{i},{i % 100 / 100},{i / 1000},{1 - i % 50 / 100},{0.5 + i % 7}" for i in range(3000)]
    with django_assert_max_num_queries(60):
        response = post_raw(client, auth, "\n".join(rows).encode(), "", query="format=csv&name=spiky")
    assert response.status_code == 201, response.content
    run = Run.objects.get()
    assert response.json()["events"] == run.events.count() > 50
    # each as the detector made it (the table's order and its unique constraint would pass any rows)
    keys = rows[0].split(",")[1:]
    series = [(int(row[0]), dict(zip(keys, map(float, row[1:])))) for row in (r.split(",") for r in rows[1:])]
    found = Detector.replay(series, run.experiment.detector_overrides)[1]
    fields = ("step", "rule", "level", "message", "signals")
    assert list(run.events.values_list(*fields)) == [
        tuple(jsonb_safe(event.get(field, {})) if field == "signals" else event[field] for field in fields)
        for event in found
    ]


def test_a_file_with_more_columns_than_a_run_logs_keys_is_refused(client, auth, monkeypatch):
    from webapp.imports import importer

    monkeypatch.setattr(importer, "MAX_KEYS_PER_RUN", 3)
    body = b"step,a,b,c\n0,1,2,3\n"
    assert post_raw(client, auth, body, "identity").status_code == 201
    response = post_raw(client, auth, b"step,a,b,c,d\n0,1,2,3,4\n", "identity")
    assert response.status_code == 400
    assert "4 metric columns; a run logs at most 3 distinct keys" in response.json()["error"]
    assert Run.objects.count() == 1
    # Two columns another trainer names one of ours by, logged at different steps: one metric once renamed
    merged = b"step,a,b,reward,critic/score/mean\n0,1,2,0.5,\n1,1,2,,0.7\n"
    assert post_raw(client, auth, merged, "identity").status_code == 201
    run = Run.objects.latest("pk")
    assert sorted(run.latest_metrics) == ["a", "b", "train/reward_mean"]
    both = b"step,a,b,reward,critic/score/mean\n0,1,2,0.5,0.6\n"  # in one step both keep a name
    response = post_raw(client, auth, both, "identity")
    assert response.status_code == 400
    assert "4 metrics once other trainers' names are renamed to ours" in response.json()["error"]
    assert Run.objects.count() == 2
