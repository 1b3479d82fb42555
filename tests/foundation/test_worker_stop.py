"""A worker on the embedded filesystem broker stops cleanly when its whole process group gets SIGTERM, as
`./echolab run` stops it: no pool child dies of the signal (one that did while waiting for a task could
hang the warm shutdown on the pool's queue lock)."""

import os
import signal
import subprocess
import time

import pytest


def test_a_worker_stops_on_sigterm_to_its_process_group(start_worker, tmp_path):
    worker = start_worker(
        "default", extra_args=("--concurrency", "2"), CELERY_BROKER_URL="", ECHOLAB_VAR=tmp_path
    )
    time.sleep(3)  # the pool's children settle into waiting for a task
    os.killpg(worker.process.pid, signal.SIGTERM)
    try:
        worker.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail(f"worker still running 20 s after SIGTERM:\n{worker.output()[-2000:]}")
    assert "exited with 'signal 15" not in worker.output()
