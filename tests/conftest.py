"""Shared fixtures: real Celery worker subprocesses against the test database and the test broker."""

import pytest

from tests.helpers import WorkerProcess


@pytest.fixture
def start_worker(transactional_db, tmp_path):
    """start_worker("gpu,default", name="w1") -> a ready WorkerProcess; all are stopped afterwards."""
    started = []

    def start(queues="default,gpu", name=None, extra_args=(), **env):
        name = name or f"w{len(started)}"
        worker = WorkerProcess(queues, name, tmp_path / f"{name}.log", extra_args, **env)
        started.append(worker)
        return worker.wait_ready()

    yield start
    for worker in started:
        worker.stop()


@pytest.fixture
def purge_broker():
    """Empty the test broker's queues so no message from an earlier test reaches this one's worker."""
    from worker.celery import app

    for queue in ("default", "gpu"):
        with app.connection_for_write() as conn:
            try:
                conn.default_channel.queue_purge(queue)
            except Exception:  # the queue does not exist yet
                pass
