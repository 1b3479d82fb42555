"""POST /api/runs/<id>/metrics: token-authenticated, validated as a whole, idempotent."""

import gzip
import json
import math

import pytest
from django.db import connection

from tests.factories import make_run, streamed_run
from webapp.experiments.models import Run
from webapp.metrics import ingest
from webapp.metrics.models import MetricPoint

URL = "/api/runs/{}/metrics"


@pytest.fixture
def run(alice):
    """What the endpoint is for: a run trained elsewhere, being logged."""
    return streamed_run(alice, step=10, total_steps=100)


def post(client, run, body, token, raw=None):
    return client.post(
        URL.format(run.pk),
        data=raw if raw is not None else json.dumps(body),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )


def stored(run):
    return sorted(MetricPoint.objects.filter(run=run).values_list("step", "key", "value"))


def test_ingest_is_idempotent_and_overwrites_a_resent_step(client, run, alice_token):
    points = [
        {"step": 0, "key": "train/success", "value": 0.25},
        {"step": 1, "key": "train/success", "value": 0.5},
    ]
    first = post(client, run, points, alice_token)
    assert first.status_code == 200 and first.json()["written"] == 2
    assert post(client, run, {"points": points}, alice_token).status_code == 200
    assert stored(run) == [(0, "train/success", 0.25), (1, "train/success", 0.5)]

    post(client, run, [{"step": 1, "key": "train/success", "value": 0.75}], alice_token)
    assert stored(run) == [(0, "train/success", 0.25), (1, "train/success", 0.75)]


def test_latest_metrics_hold_the_value_at_the_highest_step(client, run, alice_token):
    post(
        client,
        run,
        [
            {"step": 5, "key": "a", "value": 5},
            {"step": 2, "key": "a", "value": 2},
            {"step": 1, "key": "b", "value": "NaN"},
        ],
        alice_token,
    )
    # A late batch for an earlier step does not replace the latest value.
    post(client, run, [{"step": 3, "key": "a", "value": 3}], alice_token)
    run.refresh_from_db()
    assert run.latest_metrics == {"a": 5.0, "b": None}


def test_non_finite_strings_and_null_are_stored(client, run, alice_token):
    response = post(
        client,
        run,
        [
            {"step": 0, "key": "k", "value": "NaN"},
            {"step": 1, "key": "k", "value": "Infinity"},
            {"step": 2, "key": "k", "value": "-Infinity"},
            {"step": 3, "key": "k", "value": None},
            {"step": 4, "key": "k", "value": 7},
        ],
        alice_token,
    )
    assert response.status_code == 200
    values = [value for _, _, value in stored(run)]
    assert math.isnan(values[0]) and values[1:3] == [math.inf, -math.inf] and values[3:] == [None, 7.0]


def test_duplicate_points_in_one_batch_keep_the_last(client, run, alice_token):
    response = post(
        client, run, [{"step": 0, "key": "k", "value": 1}, {"step": 0, "key": "k", "value": 2}], alice_token
    )
    assert response.status_code == 200 and response.json()["written"] == 1
    assert stored(run) == [(0, "k", 2.0)]


@pytest.mark.parametrize(
    "point, field, problem",
    [
        ({"key": "k", "value": 1}, "step", "is required"),
        ({"step": -1, "key": "k", "value": 1}, "step", "must be a non-negative integer"),
        ({"step": 1.5, "key": "k", "value": 1}, "step", "must be a non-negative integer"),
        ({"step": "3", "key": "k", "value": 1}, "step", "must be a non-negative integer"),
        ({"step": True, "key": "k", "value": 1}, "step", "must be a non-negative integer"),
        ({"step": 2**31, "key": "k", "value": 1}, "step", "must be a non-negative integer"),
        ({"step": 1, "value": 1}, "key", "is required"),
        # each says which rule the key broke (one message for all three hid the length)
        ({"step": 1, "key": "", "value": 1}, "key", "must not be empty"),
        ({"step": 1, "key": "   ", "value": 1}, "key", "must not be empty"),
        ({"step": 1, "key": "x" * 251, "value": 1}, "key", "must be at most 250 characters, got 251"),
        ({"step": 1, "key": 5, "value": 1}, "key", "must be a string, got a number"),
        ({"step": 1, "key": "a\u0000b", "value": 1}, "key", "must be valid Unicode text without NUL"),
        ({"step": 1, "key": "k"}, "value", "is required"),
        ({"step": 1, "key": "k", "value": "0.5"}, "value", "must be a number, null"),
        ({"step": 1, "key": "k", "value": "nan"}, "value", "must be a number, null"),
        ({"step": 1, "key": "k", "value": [1]}, "value", "must be a number, null"),
        ({"step": 1, "key": "k", "value": False}, "value", "must be a number, null"),
        ({"step": 1, "key": "k", "value": 10**400}, "value", "must be a number, null"),
        ({"step": 1, "key": "k", "value": 1, "wall_time": 3}, "wall_time", "unknown field"),
        # a fraction outside 0..1, under our name or another trainer's, whole or not
        (
            {"step": 1, "key": "train/success", "value": 7.5},
            "value",
            "must be between 0 and 1 (train/success is a fraction), got 7.5",
        ),
        (  # quoted as sent
            {"step": 1, "key": "train/format_valid", "value": -1},
            "value",
            "must be between 0 and 1 (train/format_valid is a fraction), got -1",
        ),
        (
            {"step": 1, "key": "train/success", "value": 85},
            "value",
            "must be between 0 and 1 (train/success is a fraction), got 85; a percentage? send it divided by 100",
        ),
        (
            {"step": 1, "key": "val/sokoban/success", "value": 1e38},
            "value",
            "must be between 0 and 1 (val/sokoban/success is a fraction), got 1e+38",
        ),
    ],
)
def test_a_bad_point_is_400_naming_index_and_field_and_nothing_is_written(
    client, run, alice_token, point, field, problem
):
    good = {"step": 0, "key": "k", "value": 1.0}
    response = post(client, run, [good, good, good, point], alice_token)
    assert response.status_code == 400
    body = response.json()
    assert body["error"].startswith(f"points[3].{field}: {problem}")
    assert list(body["errors"]) == [f"points[3].{field}"]
    assert stored(run) == []


@pytest.mark.parametrize(
    "body, message",
    [
        ({"step": 1, "key": "k", "value": 1}, 'body: must be a list of points or {"points": [...]}'),
        ({"points": "many"}, "points: must be a list"),
        ({"points": [], "run": 5}, 'run: unknown field; the body is a list of points or {"points": [...]}'),
        ([1, {"step": 0, "key": "k", "value": 0}], "points[0]: must be an object with step, key and value"),
    ],
)
def test_malformed_batches_are_400(client, run, alice_token, body, message):
    response = post(client, run, body, alice_token)
    assert response.status_code == 400 and response.json()["error"] == message


def test_invalid_json_is_400(client, run, alice_token):
    response = post(client, run, None, alice_token, raw="[{step: 1")
    assert response.status_code == 400 and "not valid JSON" in response.json()["error"]


def test_every_bad_point_is_listed(client, run, alice_token):
    response = post(
        client, run, [{"step": -1, "key": "k", "value": 1}, {"step": 0, "key": "", "value": "x"}], alice_token
    )
    assert response.json()["errors"] == {
        "points[0].step": "must be a non-negative integer (at most 2147483647)",
        "points[1].key": "must not be empty",
        "points[1].value": 'must be a number, null, "NaN", "Infinity" or "-Infinity"',
    }
    assert response.json()["error"].endswith("(and 2 more)")


def test_too_many_points_is_413(client, run, alice_token):
    points = [{"step": i, "key": "k", "value": 0} for i in range(ingest.MAX_POINTS + 1)]
    response = post(client, run, points, alice_token)
    assert response.status_code == 413
    assert response.json()["errors"] == {
        "body": "10001 points in one batch; the limit is 10000: send smaller batches"
    }
    assert stored(run) == []
    assert post(client, run, points[:-1], alice_token).status_code == 200


def test_too_large_body_is_413(client, run, alice_token):
    raw = json.dumps([{"step": 0, "key": "k", "value": 0, "pad": "x" * ingest.MAX_BODY_BYTES}])
    response = post(client, run, None, alice_token, raw=raw)
    assert response.status_code == 413
    assert "the limit is 4194304" in response.json()["error"]


def test_body_beyond_djangos_upload_limit_is_413_not_400(client, run, alice_token, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 1024
    response = post(
        client, run, None, alice_token, raw=json.dumps([{"step": 0, "key": "k" * 2000, "value": 0}])
    )
    assert response.status_code == 413
    assert response.json()["errors"] == {"body": "larger than the server's limit of 1024 bytes"}


def test_an_owner_who_is_not_signed_in_owns_no_run(run):
    from django.contrib.auth.models import AnonymousUser

    from webapp.experiments.models import Run

    with pytest.raises(Run.DoesNotExist):
        ingest.write(run.pk, [(0, "k", 1.0)], owner=AnonymousUser())
    assert stored(run) == []


def test_another_users_run_is_404_and_untouched(client, run, bob_token):
    response = post(client, run, [{"step": 0, "key": "k", "value": 1}], bob_token)
    assert response.status_code == 404
    assert stored(run) == []
    missing = client.post(
        f"/api/runs/{2**62}/metrics",
        json.dumps([{"step": 0, "key": "k", "value": 1}]),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {bob_token}",
    )
    assert missing.status_code == 404 and missing.json() == response.json() == {"error": "run not found"}


def test_missing_or_wrong_token_is_401(client, run):
    response = client.post(URL.format(run.pk), data="[]", content_type="application/json")
    assert response.status_code == 401
    assert post(client, run, [], "elab_wrong").status_code == 401


def test_session_post_without_csrf_token_is_403(run, alice):
    from django.test import Client

    browser = Client(enforce_csrf_checks=True)
    browser.force_login(alice)
    response = browser.post(URL.format(run.pk), data="[]", content_type="application/json")
    assert response.status_code == 403


@pytest.mark.parametrize(
    "raw, field",
    [
        (
            '[{"step": 0, "key": "ok", "value": 1}, {"step": 1, "key": "a\\ud800b", "value": 1}]',
            "points[1].key",
        ),
        ('[{"step": 0, "key": "ok", "value": ' + "9" * 5000 + "}]", "points[0].value"),
        ('[{"step": ' + "9" * 5000 + ', "key": "ok", "value": 1}]', "points[0].step"),
        (
            '[{"step": 0, "key": "ok", "value": 1}, {"step": 1, "key": "\\u0000", "value": 1}]',
            "points[1].key",
        ),
    ],
)
def test_hostile_points_are_400_naming_the_point_and_nothing_is_written(client, run, alice_token, raw, field):
    response = post(client, run, None, alice_token, raw=raw)
    assert response.status_code == 400
    assert list(response.json()["errors"]) == [field]
    assert stored(run) == []


def test_deep_nesting_is_400_and_nothing_is_written(client, run, alice_token):
    raw = '[{"step": 0, "key": "ok", "value": ' + "[" * 100_000 + "]" * 100_000 + "}]"
    response = post(client, run, None, alice_token, raw=raw)
    assert response.status_code == 400 and "nested" in response.json()["error"]
    assert stored(run) == []


@pytest.mark.parametrize("status", ["completed", "failed", "stopped"])
def test_a_finished_run_refuses_metrics_with_409(client, run, alice_token, status):
    post(client, run, [{"step": 0, "key": "train/success", "value": 0.25}], alice_token)
    run.status = status
    run.save(update_fields=["status"])
    response = post(client, run, [{"step": 0, "key": "train/success", "value": 1.0}], alice_token)
    assert response.status_code == 409
    assert f"is {status}" in response.json()["error"]
    assert stored(run) == [(0, "train/success", 0.25)]
    run.refresh_from_db()
    assert run.latest_metrics == {"train/success": 0.25}


@pytest.mark.parametrize("vendor", ["postgresql", "other"])
@pytest.mark.parametrize("status", [Run.Status.QUEUED, Run.Status.RUNNING])
def test_a_run_echolab_trains_refuses_metrics_from_elsewhere(
    client, alice, alice_token, status, vendor, monkeypatch
):
    """Its metrics come from its worker: points sent here would overwrite its trainer's (a tester's 42 in a
    success chart) or add keys it never logged."""
    if vendor == "other":
        monkeypatch.setattr(connection, "vendor", "sqlite")
    run = make_run(alice, status=status)
    MetricPoint.upsert(run.pk, [(0, "train/success", 0.25)])  # as its worker writes
    response = post(client, run, [{"step": 0, "key": "train/success", "value": 0.9}], alice_token)
    assert response.status_code == 409
    assert response.json()["error"].startswith(
        f"run {run.pk} is trained by EchoLab ({status}): its metrics come from its worker alone"
    )
    assert stored(run) == [(0, "train/success", 0.25)]


def test_another_trainers_name_for_a_fraction_is_stored_as_sent_and_bounded(client, run, alice_token):
    # Stored as sent, but the detector reads success_rate as train/success, and an import of the run's
    # export renames it: a success rate of 85 is refused here as it is there.
    response = post(client, run, [{"step": 0, "key": "success_rate", "value": 85.0}], alice_token)
    assert response.status_code == 400 and stored(run) == []
    assert response.json()["errors"]["points[0].value"].endswith("a percentage? send it divided by 100")
    response = post(client, run, [{"step": 0, "key": "success_rate", "value": 0.85}], alice_token)
    assert response.status_code == 200 and stored(run) == [(0, "success_rate", 0.85)]


def test_the_largest_step_is_stored(client, run, alice_token):
    """Its rollup bucket ends beyond the integer range (found by Schemathesis: a 500)."""
    response = post(client, run, [{"step": ingest.MAX_STEP, "key": "k", "value": 1.0}], alice_token)
    assert response.status_code == 200
    assert stored(run) == [(ingest.MAX_STEP, "k", 1.0)]


def test_a_whole_number_written_as_a_float_is_a_step(client, run, alice_token):
    """JSON Schema's integer includes 3.0, and the OpenAPI document says integer."""
    assert post(client, run, [{"step": 3.0, "key": "k", "value": 1.0}], alice_token).status_code == 200
    assert stored(run) == [(3, "k", 1.0)]


def test_a_number_beyond_a_float_is_refused_where_infinity_is_a_value(client, run, alice_token):
    headers = {"HTTP_AUTHORIZATION": f"Bearer {alice_token}"}
    url = f"/api/runs/{run.pk}/metrics"
    body = '[{"step": 0, "key": "k", "value": Infinity}, {"step": 1, "key": "k", "value": -1e400}]'
    response = client.post(url, body, content_type="application/json", **headers)
    assert response.status_code == 400
    assert list(response.json()["errors"]) == ["points[1].value"]
    assert "beyond a 64-bit float's range" in response.json()["error"]
    assert stored(run) == []


def post_encoded(client, run, raw: bytes, token, encoding: str):
    return client.post(
        URL.format(run.pk),
        data=raw,
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
        HTTP_CONTENT_ENCODING=encoding,
    )


def test_a_gzip_compressed_body_is_read_as_its_json(client, run, alice_token):
    points = [{"step": s, "key": "train/success", "value": s / 10} for s in range(3)]
    response = post_encoded(client, run, gzip.compress(json.dumps(points).encode()), alice_token, "gzip")
    assert response.status_code == 200 and response.json()["written"] == 3
    assert stored(run) == [(s, "train/success", s / 10) for s in range(3)]


@pytest.mark.parametrize(
    "raw, encoding, status, field, fragment",
    [
        (b"[]", "br", 415, "Content-Encoding", "'br' is not supported"),
        (b"not gzip at all", "gzip", 400, "body", "not valid gzip"),
        (
            gzip.compress(b'[{"step": 0, "key": "k", "value": 1}]', mtime=0)[:-12],
            "gzip",
            400,
            "body",
            "ends early",
        ),
        (  # a few kilobytes that inflate past the limit: refused without inflating them all
            gzip.compress(b"[" + b" " * (ingest.MAX_BODY_BYTES + 10) + b"]", mtime=0),
            "gzip",
            413,
            "body",
            f"more than {ingest.MAX_BODY_BYTES} bytes once gunzipped",
        ),
        (
            gzip.compress(b"[]", mtime=0),
            "",
            400,
            "body",
            "it looks gzip-compressed: say so with Content-Encoding: gzip",
        ),
    ],
)
def test_a_body_that_cannot_be_decoded_is_refused_naming_why(
    client, run, alice_token, raw, encoding, status, field, fragment
):
    response = post_encoded(client, run, raw, alice_token, encoding)
    assert response.status_code == status
    assert fragment in response.json()["errors"][field]
    assert stored(run) == []


def test_every_member_of_a_gzip_body_is_read(client, run, alice_token):
    # Files joined one after another are one gzip stream of several members (RFC 1952 2.2), as gunzip reads them
    first, second = b'[{"step": 7, "key": "mm1", "value": 1},', b' {"step": 7, "key": "mm2", "value": 2}]'
    response = post_encoded(client, run, gzip.compress(first) + gzip.compress(second), alice_token, "gzip")
    assert response.status_code == 200, response.content
    assert stored(run) == [(7, "mm1", 1.0), (7, "mm2", 2.0)]
    garbage = gzip.compress(first + second) + b"trailing"
    response = post_encoded(client, run, garbage, alice_token, "gzip")
    assert response.status_code == 400 and "not valid gzip" in response.json()["errors"]["body"]


def test_the_answer_counts_the_keys_the_run_has_logged(client, run, alice_token):
    first = post(
        client, run, [{"step": 0, "key": "a", "value": 1}, {"step": 0, "key": "b", "value": 1}], alice_token
    )
    assert first.json()["run"]["key_count"] == 2
    again = post(
        client, run, [{"step": 1, "key": "b", "value": 1}, {"step": 1, "key": "c", "value": 1}], alice_token
    )
    assert again.json()["run"]["key_count"] == 3
    assert post(client, run, [], alice_token).json()["run"]["key_count"] == 3


@pytest.mark.parametrize("vendor", ["postgresql", "other"])
def test_a_batch_written_at_or_before_a_keys_newest_step_counts_as_a_rewrite(
    client, run, alice_token, monkeypatch, vendor
):
    if vendor == "other":  # the ORM path SQLite takes, on this database
        monkeypatch.setattr(connection, "vendor", "sqlite")

    def send(*steps, key="train/success"):
        answer = post(client, run, [{"step": s, "key": key, "value": s / 10} for s in steps], alice_token)
        assert answer.status_code == 200, answer.json()
        run.refresh_from_db()
        assert answer.json()["run"]["rewrites"] == run.rewrites  # the batch's answer counts itself
        return run.rewrites

    assert send(0, 1, 2, 4) == 0  # appends
    assert send(5, 6) == 0
    assert send(3) == 1  # late: before the newest step
    assert send(6, 7) == 2  # the newest step sent again
    assert send(0, key="val/success") == 2  # a new key is an append whatever its step
    assert send(8, 9) == 2
    body = client.get(URL.format(run.pk), HTTP_AUTHORIZATION=f"Bearer {alice_token}").json()
    assert body["run"]["rewrites"] == 2


@pytest.mark.parametrize("vendor", ["postgresql", "other"])
def test_a_batch_moves_the_runs_step_and_heartbeat_on(client, run, alice_token, monkeypatch, vendor):
    if vendor == "other":
        monkeypatch.setattr(connection, "vendor", "sqlite")
    Run.objects.filter(pk=run.pk).update(step=40, heartbeat_at=None)
    late = post(
        client, run, [{"step": 30, "key": "k", "value": 1.0}], alice_token
    )  # a late batch: step stays
    run.refresh_from_db()
    assert run.step == 40 and run.heartbeat_at is not None and late.json()["run"]["step"] == 40
    answer = post(
        client,
        run,
        [{"step": 41, "key": "k", "value": 1.0}, {"step": 45, "key": "j", "value": 2}],
        alice_token,
    )
    run.refresh_from_db()
    assert run.step == 45 and answer.json()["run"]["step"] == 45


def test_the_run_page_poll_tells_that_a_stop_was_asked(client, alice, alice_token):
    # No ETA on the page once a stop is asked: the run stops at its next step boundary.
    run = make_run(alice, status=Run.Status.RUNNING)

    def stop_requested():
        return client.get(URL.format(run.pk), HTTP_AUTHORIZATION=f"Bearer {alice_token}").json()["run"][
            "stop_requested"
        ]

    assert stop_requested() is False
    run.request_stop()
    assert stop_requested() is True


@pytest.mark.parametrize("vendor", ["postgresql", "other"])
def test_a_batch_past_the_runs_key_limit_is_refused_whole(client, run, alice_token, vendor, monkeypatch):
    """A script naming keys after a counter (`loss_{step}`) would grow a run's keys, and its page's charts,
    without bound."""
    if vendor == "other":
        monkeypatch.setattr(connection, "vendor", "sqlite")
    monkeypatch.setattr(ingest, "MAX_KEYS_PER_RUN", 4)
    first = [{"step": 0, "key": key, "value": 1} for key in ("a", "b", "c")]
    assert post(client, run, first, alice_token).status_code == 200
    at_the_limit = [{"step": 1, "key": key, "value": 2} for key in ("a", "b", "c", "d")]
    assert post(client, run, at_the_limit, alice_token).status_code == 200

    past = [{"step": 2, "key": key, "value": 3} for key in ("a", "e", "f")]
    response = post(client, run, past, alice_token)
    assert response.status_code == 400
    assert response.json()["errors"] == {
        "points": "would add 2 new keys ('e', ...) to the 4 this run has logged; a run logs at most 4 "
        "distinct keys: keep counters and ids out of key names, or log to another run"
    }
    assert MetricPoint.objects.filter(run=run, step=2).count() == 0  # not even a's point
    run.refresh_from_db()
    assert run.step == 10 and sorted(run.latest_metrics) == ["a", "b", "c", "d"]
    # the run's own keys still go in
    assert post(client, run, [{"step": 2, "key": "a", "value": 3}], alice_token).status_code == 200


def test_a_batch_past_the_key_limit_with_one_new_key_names_it_alone(client, run, alice_token, monkeypatch):
    """The example after the count read ('e', ...), which told of more new keys than the one brought."""
    monkeypatch.setattr(ingest, "MAX_KEYS_PER_RUN", 1)
    assert post(client, run, [{"step": 0, "key": "a", "value": 1}], alice_token).status_code == 200
    response = post(client, run, [{"step": 1, "key": "e", "value": 1}], alice_token)
    assert response.status_code == 400
    assert response.json()["errors"]["points"].startswith("would add 1 new key ('e') to the 1 this run has")
