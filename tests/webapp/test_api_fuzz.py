"""Schemathesis against the live server with a token: every operation in the OpenAPI document, with all
checks (no 500, status codes and bodies as documented, Allow on 405, bounds the server enforces stated in
the schema, ...), a bounded number of examples each. Zero failures is the bar."""

import subprocess
import sys
from pathlib import Path

import pytest

from tests.factories import make_experiment, make_run
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint, Sample

pytestmark = pytest.mark.slow

EXAMPLES = 20
CONFIG = Path(__file__).with_name("schemathesis.toml")


def test_schemathesis_finds_nothing(live_server, transactional_db, alice, tmp_path):
    _, token = ApiToken.issue(alice, "fuzzer")
    # Something to find by id: a live run with metrics and samples, a finished one.
    run = make_run(alice, status=Run.Status.RUNNING, step=3, total_steps=10)
    MetricPoint.upsert(run.pk, [(step, "train/success", step / 10) for step in range(3)])
    Sample.objects.create(run=run, step=2, index=0, data={"text": "hi"})
    make_run(alice, status=Run.Status.COMPLETED)
    # and an experiment imported from a file, whose alerts cannot be set (a 409)
    make_run(alice, experiment=make_experiment(alice, imported=True), status=Run.Status.COMPLETED)
    command = [
        sys.executable,
        "-m",
        "schemathesis.cli",
        "--config-file",
        str(CONFIG),
        "run",
        f"{live_server.url}/api/schema",
        "--checks",
        "all",
        "--header",
        f"Authorization: Bearer {token}",
        "--max-examples",
        str(EXAMPLES),
        "--seed",
        "18",
        "--workers",
        "1",
        "--no-shrink",
        "--generation-database",
        "none",
        "--report-dir",
        str(tmp_path),
    ]
    # In tmp_path: Schemathesis keeps a cache of what it found under its working directory.
    # A guard against a hang, not a time limit: on a loaded 2-core CI machine a run took over 170 s.
    result = subprocess.run(command, capture_output=True, text=True, timeout=400, cwd=tmp_path)
    assert result.returncode == 0, result.stdout[-12000:] + result.stderr[-3000:]
