"""A body sent with Transfer-Encoding: chunked (no Content-Length) is read as sent, by every URL: the WSGI
application as gunicorn calls it, with the chunking taken off wsgi.input as gunicorn does."""

import io
import json
import wsgiref.util

import pytest
from django.core.signals import request_finished, request_started
from django.db import close_old_connections
from django.utils import timezone

from tests.factories import make_run, streamed_run
from webapp.accounts.models import ApiToken
from webapp.core import chunked_bodies
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint
from webapp.tracking.models import ExternalExperiment, ExternalRun
from webapp.wsgi import application


class Unsized(io.BytesIO):
    """gunicorn's de-chunked wsgi.input: read(n) gives pieces until the end, which nobody announced."""


def call(method: str, path: str, body: bytes, token: str, **extra) -> tuple[int, dict]:
    environ = {
        "REQUEST_METHOD": method,
        "PATH_INFO": path,
        "CONTENT_TYPE": "application/json",
        "HTTP_TRANSFER_ENCODING": "chunked",
        "HTTP_AUTHORIZATION": f"Bearer {token}",
        "wsgi.input": Unsized(body),
        "wsgi.input_terminated": True,  # gunicorn's word that reading to the end is safe
    }
    environ.update(extra)
    wsgiref.util.setup_testing_defaults(environ)
    started = {}
    answer = b"".join(application(environ, lambda status, headers: started.update(status=status)))
    return int(started["status"].split()[0]), json.loads(answer) if answer else {}


@pytest.fixture
def token(alice):
    return ApiToken.issue(alice, "script")[1]


@pytest.fixture(autouse=True)
def connection_kept_open():
    """As Django's test client does: a request's end must not close the test's connection (its transaction)."""
    for signal in (request_started, request_finished):
        signal.disconnect(close_old_connections)
    yield
    for signal in (request_started, request_finished):
        signal.connect(close_old_connections)


def test_a_chunked_metrics_batch_is_written(alice, token):
    run = streamed_run(alice)
    status, answer = call(
        "POST", f"/api/runs/{run.pk}/metrics", b'[{"step": 1, "key": "loss", "value": 0.5}]', token
    )
    assert (status, answer["written"]) == (200, 1)
    assert MetricPoint.objects.filter(run=run, key="loss", step=1, value=0.5).exists()


def test_a_chunked_body_on_a_call_that_takes_none_is_refused_and_nothing_is_done(alice, token, purge_broker):
    run = make_run(alice, status=Run.Status.RUNNING)
    status, answer = call("POST", f"/api/runs/{run.pk}/stop", b'{"from_step": 5}', token)
    assert status == 400 and answer["error"].startswith("from_step: ")
    assert not Run.objects.get(pk=run.pk).stop_requested


def test_a_chunked_body_beyond_its_urls_limit_is_refused(alice, token, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 2 * 1024 * 1024
    run = streamed_run(alice)
    status, answer = call("POST", f"/api/runs/{run.pk}/metrics", b" " * (2 * 1024 * 1024 + 1), token)
    assert status == 413 and answer == {"error": "body: larger than the server's limit of 2097152 bytes"}
    # an import takes its file's limit; any other URL, what Django takes
    assert chunked_bodies.body_limit("/api/imports") == settings.IMPORT_MAX_BYTES + 1024 * 1024
    assert chunked_bodies.body_limit("/api/experiments") == 2 * 1024 * 1024


def test_a_chunked_artifact_is_read_by_its_view_after_the_token_and_up_to_the_artifact_limit(
    alice, token, settings, tmp_path
):
    # The mlflow client sends an empty file chunked (requests does for a body of unknown or zero length).
    settings.ARTIFACT_ROOT, settings.DATA_UPLOAD_MAX_MEMORY_SIZE = tmp_path, 1024
    settings.ARTIFACT_MAX_BYTES = 4096
    run = ExternalRun.start(ExternalExperiment.create(alice, "files"), "files", {}, "alice", timezone.now())
    folder = (
        f"/api/2.0/mlflow-artifacts/artifacts/{run.run.experiment.mlflow.mlflow_id}/{run.run_uuid}/artifacts"
    )
    assert call("PUT", f"{folder}/empty.txt", b"", token) == (200, {})
    assert call("PUT", f"{folder}/big.bin", b"x" * 4096, token) == (200, {})  # beyond Django's 1,024
    assert [(path.name, path.stat().st_size) for path in sorted(run.artifact_dir.iterdir())] == [
        ("big.bin", 4096),
        ("empty.txt", 0),
    ]
    status, answer = call("PUT", f"{folder}/huge.bin", b"x" * 4097, token)
    assert (
        status == 400
        and "huge.bin: the upload is more than an artifact may hold here (4,096 bytes" in answer["message"]
    )
    assert not (run.artifact_dir / "huge.bin").exists()
    # Without a valid token, refused before a byte of the body is read: nobody fills the disk anonymously.
    unread = Unsized(b"x" * 10_000)
    environ_input = {"wsgi.input": unread}
    assert call("PUT", f"{folder}/anon.bin", b"", "not-a-token", **environ_input)[0] == 401
    assert unread.tell() == 0


class BrokenChunks(Unsized):
    """gunicorn's wsgi.input for a chunked body framed wrongly: reading it raises the parser's error."""

    def read(self, size=-1):
        from gunicorn.http.errors import InvalidChunkSize

        raise InvalidChunkSize(b"zz")


def test_a_chunked_artifact_framed_wrongly_is_the_clients_error_not_a_server_error(
    alice, token, settings, tmp_path
):
    settings.ARTIFACT_ROOT = tmp_path
    run = ExternalRun.start(ExternalExperiment.create(alice, "files"), "files", {}, "alice", timezone.now())
    path = f"/api/2.0/mlflow-artifacts/artifacts/{run.run.experiment.mlflow.mlflow_id}/{run.run_uuid}/artifacts/x"
    status, answer = call("PUT", path, b"", token, **{"wsgi.input": BrokenChunks()})
    assert status == 400 and answer["error_code"] == "BAD_REQUEST"
    assert answer["message"].startswith("the upload's body could not be read: Invalid chunk size")
    assert not run.artifact_dir.exists() and list((tmp_path / ".incoming").iterdir()) == []
