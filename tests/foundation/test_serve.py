"""`./echolab run` (manage.py serve) on the embedded defaults: SQLite, filesystem broker, no servers."""

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
import urllib.request

import pytest

from tests.helpers import REPO_ROOT, free_port, wait_for



def get_json(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, json.load(response)
    except OSError:
        return None


@pytest.mark.slow
def test_serve_starts_everything_on_embedded_defaults_and_stops_on_ctrl_c(tmp_path, tiny_model_dir):
    # tiny_model_dir points MODEL_ROOT at the session's tiny model, so serve need not build its own.
    port = free_port()
    env = {key: value for key, value in os.environ.items()
           if key not in ("DATABASE_URL", "CELERY_BROKER_URL", "EMAIL_URL")}
    env.update(ECHOLAB_VAR=str(tmp_path), PYTHONUNBUFFERED="1")
    log = open(tmp_path / "serve.log", "w+")
    serve = subprocess.Popen([sys.executable, "manage.py", "serve", "--port", str(port), "--no-demo"],
                             cwd=REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        status, body = wait_for(lambda: get_json(f"http://127.0.0.1:{port}/healthz"), timeout=120,
                                message="healthz")
        assert status == 200 and body["status"] == "ok"
        assert (tmp_path / "echolab.sqlite3").exists()
        log_text = lambda: (tmp_path / "serve.log").read_text()  # noqa: E731
        wait_for(lambda: re.search(r"gpu@\S+ ready", log_text()) and re.search(r"default@\S+ ready", log_text()),
                 timeout=120, message="both workers ready")
        subprocess.run([sys.executable, "manage.py", "shell", "-c",
                        "from worker.tasks import ping; ping.apply_async(args=['embedded'], queue='default')"],
                       cwd=REPO_ROOT, env=env, check=True, timeout=60)
        database = sqlite3.connect(tmp_path / "echolab.sqlite3")
        wait_for(lambda: database.execute("select count(*) from core_workerping where nonce='embedded'").fetchone()[0],
                 timeout=60, message="the ping through the filesystem broker")
        database.close()
        output = (tmp_path / "serve.log").read_text()
        assert "Created login: user 'admin', password '" in output
    finally:
        os.killpg(serve.pid, signal.SIGINT)
        serve.wait(timeout=60)
    output = (tmp_path / "serve.log").read_text()
    assert "Stopped." in output, output[-3000:]
    assert "did not stop" not in output, output[-3000:]  # each process stopped on SIGTERM, none was killed
    pids = [int(line.rsplit("pid ", 1)[1].rstrip(")")) for line in output.splitlines() if "started " in line and "(pid " in line]
    assert len(pids) == 4, output[-3000:]
    for pid in pids:
        assert not os.path.exists(f"/proc/{pid}") or "zombie" in open(f"/proc/{pid}/status").read().lower()
    assert get_json(f"http://127.0.0.1:{port}/healthz") is None, "web server still answering after Ctrl-C"
