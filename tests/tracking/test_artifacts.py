"""Artifacts logged by the real `mlflow` client are kept with their run: listed and read back as MLflow's own
store lists and reads them, refused where MLflow's server refuses them, shown on the run page, and removed
with the run. The run page's other record of what a script logged beside its metrics, its datasets, too."""

import http.client
import io
import json
import os
import re
import socket
import stat
from urllib.parse import urlsplit

import pytest
from django.utils import timezone

from webapp.accounts.models import ApiToken
from webapp.experiments.models import Run
from webapp.runs import views
from webapp.tracking.artifacts import Artifact
from webapp.tracking.models import ExternalExperiment, ExternalRun
from webapp.tracking.protocol import MlflowError

PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(200))


@pytest.fixture(autouse=True)
def artifact_root(settings, tmp_path):
    settings.ARTIFACT_ROOT = tmp_path / "artifacts"
    return settings.ARTIFACT_ROOT


def log_the_same_files(mlflow, folder) -> str:
    """One run of every kind of artifact call a script makes; its run id. Not an empty file: the client sends
    it chunked, which the test server cannot read (gunicorn can: tests/webapp/test_chunked_bodies.py)."""
    (folder / "checkpoint" / "tokenizer").mkdir(parents=True)
    (folder / "checkpoint" / "config.json").write_text('{"layers": 2}')
    (folder / "checkpoint" / "tokenizer" / "vocab.txt").write_text("a\nb\nc\n")
    (folder / "checkpoint" / "weights.bin").write_bytes(bytes(range(256)) * 40)
    (folder / "plot.png").write_bytes(PNG)
    with mlflow.start_run() as run:
        mlflow.log_artifacts(str(folder / "checkpoint"), artifact_path="checkpoint")
        mlflow.log_artifact(str(folder / "plot.png"))
        mlflow.log_text("step 1: reward 0.5\n", "logs/train.log")
        mlflow.log_dict({"lr": 1e-6, "beta": [0.9, 0.99]}, "config/run.json")
        mlflow.log_dict({"lr": 1e-6}, "config/run.yaml")
    return run.info.run_id


def listed(client, run_id: str, path: str | None = None) -> list[tuple]:
    """Every file and folder under `path`, recursively, as the client lists them."""
    found = []
    for info in client.list_artifacts(run_id, path):
        found.append((info.path, info.is_dir, info.file_size))
        if info.is_dir:
            found += listed(client, run_id, info.path)
    return found


def test_artifacts_are_listed_and_read_back_as_mlflows_own_store_does(mlflow_alice, tmp_path, monkeypatch):
    mlflow = mlflow_alice
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3's file store, kept for the peer
    ours = log_the_same_files(mlflow, tmp_path / "ours")
    echolab = mlflow.MlflowClient()

    # The peer: the same calls through the same client into MLflow's own file store and artifact repository.
    peer_uri = (tmp_path / "mlruns").as_uri()
    mlflow.set_tracking_uri(peer_uri)
    theirs = log_the_same_files(mlflow, tmp_path / "theirs")
    peer = mlflow.MlflowClient(tracking_uri=peer_uri)

    assert listed(echolab, ours) == listed(peer, theirs)
    assert listed(echolab, ours, "checkpoint") == listed(peer, theirs, "checkpoint")
    assert listed(echolab, ours, "plot.png") == listed(peer, theirs, "plot.png") == []  # a file lists nothing
    assert listed(echolab, ours, "not/there") == listed(peer, theirs, "not/there") == []
    assert ("checkpoint/weights.bin", False, 10240) in listed(echolab, ours)

    from mlflow import artifacts

    for path in ("checkpoint", "logs/train.log", "plot.png"):
        mine = artifacts.download_artifacts(
            run_id=ours, artifact_path=path, dst_path=str(tmp_path / "a"), tracking_uri=echolab.tracking_uri
        )
        peers = artifacts.download_artifacts(
            run_id=theirs, artifact_path=path, dst_path=str(tmp_path / "b"), tracking_uri=peer_uri
        )
        assert tree(mine) == tree(peers)
    mlflow.set_tracking_uri(echolab.tracking_uri)
    assert artifacts.load_dict(f"runs:/{ours}/config/run.json") == {"lr": 1e-6, "beta": [0.9, 0.99]}
    assert artifacts.load_text(f"runs:/{ours}/logs/train.log") == "step 1: reward 0.5\n"


def tree(path: str) -> dict:
    from pathlib import Path

    root = Path(path)
    if root.is_file():
        return {root.name: root.read_bytes()}
    return {
        file.relative_to(root).as_posix(): file.read_bytes() for file in root.rglob("*") if file.is_file()
    }


@pytest.fixture
def send(live_server, alice):
    """A raw HTTP call to the live server as alice: what another client (curl) can send."""
    token = ApiToken.issue(alice, "raw")[1]
    address = urlsplit(live_server.url)

    def call(method, path, body=None, headers=None, token=token):
        connection = http.client.HTTPConnection(address.hostname, address.port, timeout=30)
        sent = {"Authorization": f"Bearer {token}", **(headers or {})}
        if isinstance(body, list):  # sent chunked, without a Content-Length
            connection.request(method, path, body=iter(body), headers=sent, encode_chunked=True)
        else:
            connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        answer = (response.status, dict(response.getheaders()), response.read())
        connection.close()
        return answer

    return call


@pytest.fixture
def run(alice):
    return ExternalRun.start(ExternalExperiment.create(alice, "files"), "files", {}, "alice", timezone.now())


def path_of(run: ExternalRun, inside: str = "") -> str:
    """MLflow's name of a file of the run: its place under the artifact root."""
    return f"{run.run.experiment.mlflow.mlflow_id}/{run.run_uuid}/artifacts/{inside}"


def url_of(run: ExternalRun, inside: str = "") -> str:
    return f"/api/2.0/mlflow-artifacts/artifacts/{path_of(run, inside)}"


def error(answer) -> tuple[int, str, str]:
    status, _, body = answer
    payload = json.loads(body)
    return status, payload["error_code"], payload["message"]


@pytest.mark.parametrize(
    "inside, problem",
    [
        ("../../other/x.txt", "'..' part"),
        ("a/../b.txt", "'..' part"),
        ("a\\b.txt", "backslash"),
        ("a%23b.txt", "'#'"),
        ("a%00b.txt", "control character"),
        ("x" * 300, "at most 255"),
    ],
)
def test_a_path_mlflows_server_refuses_is_refused_naming_it_and_nothing_is_written(
    send, run, artifact_root, inside, problem
):
    status, code, message = error(send("PUT", url_of(run, inside), b"data"))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert message.startswith("path: ") and problem in message
    assert not artifact_root.exists() or not any(artifact_root.rglob("*.txt"))


def test_a_path_too_deep_is_refused_and_a_delete_through_a_file_deletes_nothing(send, run):
    status, code, message = error(send("PUT", url_of(run, "d/" * 65 + "x.txt"), b"x"))
    assert (status, code, message) == (
        400,
        "INVALID_PARAMETER_VALUE",
        "path: has 66 names (folders and file) inside its run; at most 64",
    )
    assert send("PUT", url_of(run, "d/" * 63 + "x.txt"), b"x")[0] == 200
    assert send("PUT", url_of(run, "f.txt"), b"x")[0] == 200
    assert send("DELETE", url_of(run, "f.txt/g"))[0] == 200  # nothing there (MLflow's answer), not a 500
    assert (run.artifact_dir / "f.txt").read_bytes() == b"x"
    assert send("DELETE", url_of(run, "d"))[0] == 200 and not (run.artifact_dir / "d").exists()


def test_another_users_run_is_not_found_and_a_path_outside_a_run_is_named(send, run, bob):
    bobs = ExternalRun.start(ExternalExperiment.create(bob, "bob's"), "b", {}, "bob", timezone.now())
    for method in ("PUT", "GET", "DELETE"):
        status, code, message = error(send(method, url_of(bobs, "x.txt"), b"data"))
        assert (status, code) == (404, "RESOURCE_DOES_NOT_EXIST") and bobs.run_uuid in message
    wrong_experiment = url_of(run, "x.txt").replace(f"/{run.run.experiment.mlflow.mlflow_id}/", "/999999/")
    assert error(send("PUT", wrong_experiment, b"data"))[:2] == (404, "RESOURCE_DOES_NOT_EXIST")
    mlflow_id = run.run.experiment.mlflow.mlflow_id
    for path in (f"{mlflow_id}", f"{mlflow_id}/{run.run_uuid}", f"{mlflow_id}/{run.run_uuid}/model"):
        status, code, message = error(send("GET", f"/api/2.0/mlflow-artifacts/artifacts?path={path}"))
        assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
        assert message.startswith("path: ") and "<experiment id>/<run id>/artifacts/" in message
    status, code, message = error(send("GET", "/api/2.0/mlflow-artifacts/artifacts"))
    assert (status, code, message) == (400, "INVALID_PARAMETER_VALUE", "path: is required")
    assert error(send("GET", url_of(run, "missing.txt")))[:2] == (404, "RESOURCE_DOES_NOT_EXIST")
    assert send("PUT", url_of(run, "x.txt"), b"data", token="not-a-token")[0] == 401


def test_an_upload_is_stored_whole_or_not_at_all(send, run, settings, artifact_root):
    settings.ARTIFACT_MAX_BYTES = 1000
    status, code, message = error(send("PUT", url_of(run, "big.bin"), b"x" * 1001))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert "big.bin: 1,001 bytes is more than an artifact may hold here (1,000 bytes" in message
    # Chunked, the body's size is not known before it is read: refused, not stored empty.
    status, code, message = error(send("PUT", url_of(run, "chunked.bin"), [b"abc", b"def"]))
    assert (status, code) == (400, "BAD_REQUEST") and "Content-Length" in message
    assert not run.artifact_dir.exists()  # not even an empty file

    assert send("PUT", url_of(run, "a/b.txt"), b"first")[0] == 200
    assert send("PUT", url_of(run, "a/b.txt"), b"second")[0] == 200  # replaced, as MLflow does
    assert send("GET", url_of(run, "a/b.txt"))[2] == b"second"
    status, code, message = error(send("PUT", url_of(run, "a"), b"x"))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "'a' is a folder" in message
    status, code, message = error(send("PUT", url_of(run, "a/b.txt/c.txt"), b"x"))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "'a/b.txt' is a file" in message
    assert {p.name for p in artifact_root.rglob("*")} == {".incoming", ".lock", "a", "b.txt", run.run_uuid}
    # Stored with the mode every other file the server writes has (the umask's), not a temporary file's 0600.
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE((run.artifact_dir / "a" / "b.txt").stat().st_mode) == 0o666 & ~umask


def test_an_upload_cut_short_leaves_nothing(live_server, alice, run, artifact_root):
    token = ApiToken.issue(alice, "raw")[1]
    address = urlsplit(live_server.url)
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        sock.sendall(
            f"PUT {url_of(run, 'models/final/cut.bin')} HTTP/1.1\r\nHost: localhost\r\n"
            f"Authorization: Bearer {token}\r\nContent-Length: 100\r\n\r\nonly this".encode()
        )
        sock.shutdown(socket.SHUT_WR)  # the client is gone after 9 of its 100 bytes
        answer = sock.makefile("rb").read()
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400")
    message = "models/final/cut.bin: the upload ended after 9 of its 100 bytes; nothing stored"
    assert json.loads(body)["message"] == message
    assert not run.artifact_dir.exists()  # not even its folders
    assert list((artifact_root / ".incoming").iterdir()) == []


def test_a_deleted_run_takes_no_artifacts_until_restored(send, run):
    run.run.archive()
    status, code, message = error(send("PUT", url_of(run, "x.txt"), b"x"))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE") and "Current state is deleted" in message
    run.run.restore()
    assert send("PUT", url_of(run, "x.txt"), b"x")[0] == 200
    assert send("DELETE", url_of(run, "x.txt"))[0] == 200
    assert not (run.artifact_dir / "x.txt").exists()


def test_a_run_whose_experiment_names_its_own_location_takes_no_files_here(send, alice, artifact_root):
    experiment = ExternalExperiment.create(alice, "bucketed", artifact_location="s3://lab/rl")
    run = ExternalRun.start(experiment, "r", {}, "alice", timezone.now())
    status, code, message = error(send("PUT", url_of(run, "x.txt"), b"x"))
    assert (status, code) == (400, "INVALID_PARAMETER_VALUE")
    assert message == (
        f"path: the run's files go to its experiment's own artifact location, s3://lab/rl/{run.run_uuid}"
        "/artifacts, which the client writes to itself; EchoLab keeps none of them"
    )
    assert not run.artifact_dir.exists()


def test_files_are_served_so_a_logged_page_cannot_run_on_echolabs_origin(send, run):
    for name, body in (("page.html", b"<script>alert(1)</script>"), ("plot.png", PNG), ("w.bin", b"\0\1")):
        assert send("PUT", url_of(run, name), body)[0] == 200
    status, headers, body = send("GET", url_of(run, "page.html"))
    assert (status, body) == (200, b"<script>alert(1)</script>")
    assert headers["Content-Type"] == "text/plain; charset=utf-8"
    assert headers["Content-Security-Policy"].startswith("sandbox")
    assert headers["X-Content-Type-Options"] == "nosniff"
    status, headers, body = send("GET", url_of(run, "plot.png"))
    assert (status, headers["Content-Type"], body) == (200, "image/png", PNG)
    status, headers, _ = send("GET", url_of(run, "w.bin"))
    assert headers["Content-Type"] == "application/octet-stream"
    assert headers["Content-Disposition"].startswith("attachment")


@pytest.mark.parametrize(
    "name, served_as",
    [
        (
            "train.log",
            "text/plain; charset=utf-8",
        ),  # what log_text writes: no MIME table of the host's knows .log
        ("run.yaml", "text/plain; charset=utf-8"),  # log_dict
        ("metrics.jsonl", "text/plain; charset=utf-8"),
        ("Plot.PNG", "image/png"),
        ("metrics.csv.gz", "application/octet-stream"),  # compressed: not text, whatever came before .gz
        ("page.html.gz", "application/octet-stream"),
        ("report.pdf", "application/octet-stream"),
        ("no-suffix", "application/octet-stream"),
    ],
)
def test_a_file_is_served_by_its_name_whatever_the_hosts_mime_tables_say(run, name, served_as):
    assert Artifact(run, f"logs/{name}").content_type() == served_as


def test_deleting_a_run_removes_its_artifacts(send, run):
    assert send("PUT", url_of(run, "model/weights.bin"), b"w" * 100)[0] == 200
    folder = run.artifact_dir
    assert (folder / "model" / "weights.bin").stat().st_size == 100
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    run.run.refresh_from_db()
    run.run.delete_with_data()
    assert not folder.exists()


def test_the_run_page_lists_the_files_and_links_each_for_its_owner_only(alice, bob, run, client, monkeypatch):
    token = ApiToken.issue(alice, "raw")[1]
    for inside, body in (
        ("plots/reward.png", PNG),
        ("notes.txt", b"lr too high?"),
        ("model/w.bin", b"w" * 3000),
    ):
        put = client.generic("PUT", url_of(run, inside), body, HTTP_AUTHORIZATION=f"Bearer {token}")
        assert put.status_code == 200
    client.force_login(alice)
    page = client.get(run.run.get_absolute_url())
    section = visible_text(page, "mlflow-artifacts")
    assert "3 files the script logged, as of this page's loading." in section
    # A folder's files first, then its folders, as a file browser lists them
    assert (
        section.index("notes.txt 12 bytes")
        < section.index("model/w.bin 2.9 KB")
        < section.index("plots/reward")
    )
    link = f"/mlflow/runs/{run.run_uuid}/artifacts/plots/reward.png"
    assert f'href="{link}"' in page.content.decode()
    downloaded = client.get(link)
    assert (downloaded.status_code, downloaded["Content-Type"], b"".join(downloaded.streaming_content)) == (
        200,
        "image/png",
        PNG,
    )
    bobs = ExternalRun.start(ExternalExperiment.create(bob, "bob's"), "b", {}, "bob", timezone.now())
    bobs.artifact_dir.mkdir(parents=True)
    (bobs.artifact_dir / "secret.txt").write_text("bob's")
    assert (
        client.get(f"/mlflow/runs/{run.run_uuid}/artifacts/../{bobs.run_uuid}/secret.txt").status_code == 404
    )
    assert client.get(f"/mlflow/runs/{bobs.run_uuid}/artifacts/secret.txt").status_code == 404
    client.force_login(bob)
    assert client.get(link).status_code == 404

    client.force_login(alice)
    monkeypatch.setattr(views, "ARTIFACTS_SHOWN", 2)
    section = visible_text(client.get(run.run.get_absolute_url()), "mlflow-artifacts")
    assert "3 files the script logged, the first 2 shown" in section
    assert "plots/reward.png" not in section


def test_a_folder_or_an_empty_file_answers_as_mlflows_server(send, run):
    assert send("PUT", url_of(run, "logs/empty.txt"), b"")[0] == 200  # Content-Length: 0, as curl sends it
    status, _, body = send("GET", f"/api/2.0/mlflow-artifacts/artifacts?path={path_of(run, 'logs')}")
    # MLflow's FileInfo leaves a size of 0 out (the client reads None), and an empty listing is {}
    assert (status, json.loads(body)) == (200, {"files": [{"path": "empty.txt", "is_dir": False}]})
    status, _, body = send("GET", f"/api/2.0/mlflow-artifacts/artifacts?path={path_of(run, 'none')}")
    assert (status, json.loads(body)) == (200, {})
    status, code, message = error(send("GET", url_of(run, "logs")))
    assert (status, code, message) == (
        400,
        "INVALID_PARAMETER_VALUE",
        "path: 'logs' is a folder of the run's artifacts, not a file",
    )


class Body:
    """An upload's body that does something else while it is read: what another request does meanwhile."""

    def __init__(self, data: bytes, meanwhile):
        self.data, self.meanwhile = io.BytesIO(data), meanwhile

    def read(self, size: int) -> bytes:
        if self.meanwhile:
            self.meanwhile()
            self.meanwhile = None
        return self.data.read(size)


def test_what_changes_while_an_upload_arrives_gets_an_answer_not_a_server_error(run, artifact_root):
    # a file put in where the upload's folder was to be
    folder_taken = Body(b"data", lambda: Artifact(run, "a").save(io.BytesIO(b"x"), 1))
    with pytest.raises(MlflowError, match="'a' is a file of this run's artifacts"):
        Artifact(run, "a/b.txt").save(folder_taken, 4)
    # a folder made where the file was to be
    name_taken = Body(b"data", lambda: Artifact(run, "c/d.txt").save(io.BytesIO(b"x"), 1))
    with pytest.raises(MlflowError, match="'c' is a folder of this run's artifacts, not a file"):
        Artifact(run, "c").save(name_taken, 4)
    # its folder deleted: made again
    Artifact(run, "e/f.txt").save(Body(b"data", lambda: Artifact(run, "e").delete()), 4)
    assert (run.artifact_dir / "e" / "f.txt").read_bytes() == b"data"
    # the run deleted
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    with pytest.raises(MlflowError, match=f"no run with id '{run.run_uuid}'"):
        Artifact(run, "g.txt").save(Body(b"data", lambda: Run.objects.get(pk=run.pk).delete_with_data()), 4)
    assert not (run.artifact_dir / "g.txt").exists()
    assert list((artifact_root / ".incoming").iterdir()) == []


def visible_text(page, element_id: str) -> str:
    """The words of one section of a page as a reader meets them: tags out, whitespace collapsed."""
    html = page.content.decode()
    start = html.index(f'id="{element_id}"')
    section = html[start : html.index("</section>", start)]
    return " ".join(re.sub(r"<[^>]+>", " ", section).replace("&nbsp;", " ").split())


def test_the_run_page_lists_the_datasets_the_run_used(alice, run, client):
    run.add_inputs(
        [
            {
                "tags": [{"key": "mlflow.data.context", "value": "training"}],
                "dataset": {
                    "name": "bandit-train",
                    "digest": "92a7ac9c",
                    "source_type": "s3",
                    "source": "s3://b/t",
                },
            }
        ]
    )
    client.force_login(alice)
    section = visible_text(client.get(run.run.get_absolute_url()), "mlflow-datasets")
    assert "bandit-train 92a7ac9c s3: s3://b/t context=training" in section
