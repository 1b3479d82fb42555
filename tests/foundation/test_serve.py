"""`./echolab run` (manage.py serve) on the embedded defaults: SQLite, filesystem broker, no servers."""

import http.client
import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import urllib.error
import urllib.request

import pytest

from tests.helpers import REPO_ROOT, free_port, wait_for
from webapp.core.management.commands.serve import BUILD_SCRIPT


def get_json(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.load(response)
    except OSError:
        return None


def fetch_error(url, with_body=False):
    try:
        urllib.request.urlopen(url, timeout=5)
    except urllib.error.HTTPError as error:
        answer = (error.code, error.headers["Content-Type"])
        return (*answer, json.load(error)) if with_body else answer
    raise AssertionError(f"{url[:60]}... answered 2xx")


ISSUE_TOKEN = (
    "from django.contrib.auth.models import User; from webapp.accounts.models import ApiToken; "
    "print(ApiToken.issue(User.objects.get(username='admin'), 'chunked')[1])"
)


def post_chunked(port: int, path: str, body: bytes, token: str) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    connection.request("POST", path, body=iter([body[:5], body[5:]]), headers=headers, encode_chunked=True)
    response = connection.getresponse()
    return response.status, json.load(response)


@pytest.mark.slow
def test_serve_starts_everything_on_embedded_defaults_and_stops_on_ctrl_c(tmp_path, tiny_model_dir):
    # tiny_model_dir points MODEL_ROOT at the session's tiny model, so serve need not build its own.
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "EMAIL_URL")
    }
    env.pop("SITE_URL", None)
    env.update(ECHOLAB_VAR=str(tmp_path), PYTHONUNBUFFERED="1")
    log = open(tmp_path / "serve.log", "w+")
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port), "--no-demo"],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        status, body = wait_for(
            lambda: get_json(f"http://127.0.0.1:{port}/healthz"), timeout=120, message="healthz"
        )
        assert status == 200 and body["status"] == "ok"
        assert (tmp_path / "echolab.sqlite3").exists()
        # Static files are served collected: names with a content hash, kept for good, and gzipped.
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/accounts/login/", timeout=5) as response:
            assert re.search(r'href="/static/css/echolab\.[0-9a-f]{12}\.css"', response.read().decode())
        manifest = json.loads((tmp_path / "staticfiles" / "staticfiles.json").read_text())["paths"]
        plotly = f"http://127.0.0.1:{port}/static/{manifest['vendor/plotly/plotly-cartesian.min.js']}"
        asked = urllib.request.Request(plotly, headers={"Accept-Encoding": "gzip"})
        with urllib.request.urlopen(asked, timeout=10) as response:
            assert response.headers["Content-Encoding"] == "gzip"
            assert "immutable" in response.headers["Cache-Control"]
            assert len(response.read()) < 600_000  # 1.5 MB as it is
        # A URL naming 100 long keys fits gunicorn's request line; a longer one is refused as JSON, as by Django.
        keys = "&".join(f"key={'k' * 70}{i:02d}" for i in range(100))
        assert fetch_error(f"http://127.0.0.1:{port}/api/runs/1/metrics?{keys}") == (401, "application/json")
        status, content_type, body = fetch_error(
            f"http://127.0.0.1:{port}/api/runs/1/metrics?{keys}{keys}", True
        )
        assert (status, content_type) == (414, "application/json")
        assert list(body) == ["error"] and body["error"].startswith(
            "URI Too Long: Request Line is too large ("
        )
        log_text = lambda: (tmp_path / "serve.log").read_text()  # noqa: E731
        try:  # 8 s on a quiet machine; CI's two busy cores once took over 120
            wait_for(
                lambda: (
                    re.search(r"gpu@\S+ ready", log_text()) and re.search(r"default@\S+ ready", log_text())
                ),
                timeout=300,
                message="both workers ready",
            )
        except TimeoutError as error:
            raise TimeoutError(f"{error}; the log's end:\n{log_text()[-4000:]}") from None
        subprocess.run(
            [
                sys.executable,
                "manage.py",
                "shell",
                "-c",
                "from worker.tasks import ping; ping.apply_async(args=['embedded'], queue='default')",
            ],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            timeout=60,
        )
        database = sqlite3.connect(tmp_path / "echolab.sqlite3")
        wait_for(
            lambda: database.execute(
                "select count(*) from core_workerping where nonce='embedded'"
            ).fetchone()[0],
            timeout=60,
            message="the ping through the filesystem broker",
        )
        database.close()
        # A body sent chunked (no Content-Length) reaches the view as sent, through gunicorn.
        token = subprocess.run(
            [sys.executable, "manage.py", "shell", "-c", ISSUE_TOKEN],
            cwd=REPO_ROOT,
            env=env,
            check=True,
            timeout=60,
            capture_output=True,
            text=True,
        ).stdout.split()[-1]
        body = b'{"name": "chunked", "env": {"name": "chess"}}'
        status, answer = post_chunked(port, "/api/experiments", body, token)
        assert status == 400 and list(answer["errors"]) == ["env"] and "'chess'" in answer["error"], answer
        output = (tmp_path / "serve.log").read_text()
        assert "Created login: user 'admin', password '" in output
        password = output.split("password '")[1].split("'")[0]
        # Once every process serves, the URL and the login come again, below the start-up noise.
        wait_for(lambda: "EchoLab is ready at" in log_text(), timeout=60, message="the ready line")
        assert (
            f"EchoLab is ready at http://127.0.0.1:{port}/: log in as 'admin' with password '{password}'"
            in log_text()
        )
        # Email links name the port served on (SITE_URL is not set here).
        web_pid = int(log_text().split("started web (pid ")[1].split(")")[0])
        environ = open(f"/proc/{web_pid}/environ", "rb").read().split(b"\0")
        assert f"SITE_URL=http://127.0.0.1:{port}".encode() in environ
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(timeout=60)
    output = (tmp_path / "serve.log").read_text()
    assert "Stopped." in output, output[-3000:]
    assert "did not stop" not in output, output[-3000:]  # each process stopped on SIGTERM, none was killed
    pids = [
        int(line.rsplit("pid ", 1)[1].rstrip(")"))
        for line in output.splitlines()
        if "started " in line and "(pid " in line
    ]
    assert len(pids) == 4, output[-3000:]
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()
    assert get_json(f"http://127.0.0.1:{port}/healthz") is None, "web server still answering after Ctrl-C"


@pytest.mark.slow
def test_a_first_start_answers_at_once_while_the_tiny_model_builds(tmp_path):
    port = free_port()
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "EMAIL_URL", "SITE_URL")
    }
    env.update(
        ECHOLAB_VAR=str(tmp_path),
        MODEL_ROOT=str(tmp_path / "models"),
        PYTHONUNBUFFERED="1",
        ECHOLAB_THREADS="1",
    )
    log = open(tmp_path / "serve.log", "w+")
    serve = subprocess.Popen(
        [sys.executable, "manage.py", "serve", "--port", str(port)],
        cwd=REPO_ROOT,
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        # The model takes minutes; the server must not wait for it.
        status, body = wait_for(
            lambda: get_json(f"http://127.0.0.1:{port}/healthz"), timeout=60, message="healthz"
        )
        assert status == 200
        wait_for(
            lambda: (tmp_path / "first-start.json").exists(), timeout=60, message="the build's progress file"
        )
        assert "Building the tiny local model" in (tmp_path / "serve.log").read_text()
        progress = json.loads((tmp_path / "first-start.json").read_text())
        assert progress["state"] == "building" and progress["steps"] == 150
        assert not (tmp_path / "models" / "tiny" / "config.json").exists()
        # No demo yet: its runs would need the model.
        database = sqlite3.connect(tmp_path / "echolab.sqlite3")
        assert database.execute("select count(*) from experiments_experiment").fetchone()[0] == 0
        database.close()
        build_pid = next(
            int(line.split()[0])
            for line in subprocess.run(
                ["ps", "-ww", "-o", "pid=,args=", "--ppid", str(serve.pid)], capture_output=True, text=True
            ).stdout.splitlines()
            if BUILD_SCRIPT in line
        )
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(timeout=60)
    assert "Stopped." in (tmp_path / "serve.log").read_text()
    assert (
        not os.path.exists(f"/proc/{build_pid}")
        or "zombie" in open(f"/proc/{build_pid}/status").read().lower()
    )


def test_stopping_waits_for_a_training_step_and_a_second_ctrl_c_stops_at_once(monkeypatch):
    # A demo step took a minute on 2 cores, and the gpu worker was killed after 60 s, mid-step: the run then
    # redid the steps since its last checkpoint. It gets minutes now, and the console says what it waits for.
    import io
    import threading
    import time

    from webapp.core.management.commands import serve

    monkeypatch.setattr(serve, "SAY_WAITING_AFTER", 0.5)
    # A worker in the middle of a step: it ignores SIGTERM until the step would end
    ignore_sigterm = lambda: signal.signal(signal.SIGTERM, signal.SIG_IGN)  # noqa: E731 (ignored before exec)
    step = subprocess.Popen(["sleep", "60"], start_new_session=True, preexec_fn=ignore_sigterm)
    command = serve.Command(stdout=io.StringIO(), stderr=io.StringIO())
    command.build = None
    handlers = {signum: signal.getsignal(signum) for signum in (signal.SIGINT, signal.SIGTERM)}
    second_ctrl_c = threading.Timer(2.0, os.kill, (os.getpid(), signal.SIGINT))
    started = time.monotonic()
    try:
        second_ctrl_c.start()
        command.stop({"worker-gpu": step})
    finally:
        second_ctrl_c.cancel()
        for signum, handler in handlers.items():
            signal.signal(signum, handler)
    took = time.monotonic() - started
    assert step.returncode == -signal.SIGKILL
    assert 1.5 < took < 20  # waited past the old message, not the 10 minutes
    said = command.stdout.getvalue()
    assert (
        "Waiting for worker-gpu to stop: a run it trains ends its step and checkpoints first (up to 10 minutes)"
        in said
    )
    assert "echolab: worker-gpu stopping at once; killing it" in command.stderr.getvalue()
    assert said.rstrip().endswith("Stopped.")
