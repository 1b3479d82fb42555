"""Shared fixtures: real Celery worker subprocesses against the test database and the test broker."""

import os

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


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory):
    """The tiny model, built once per session as `tiny` is everywhere; "tiny" resolves to it."""
    import torch

    from trainer import tiny_model

    root = os.environ.get("ECHOLAB_TEST_MODEL_ROOT") or str(tmp_path_factory.mktemp("models"))
    path = os.path.join(root, "tiny")
    old = os.environ.get("MODEL_ROOT")
    os.environ["MODEL_ROOT"] = root
    if not os.path.exists(os.path.join(path, "config.json")):
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            tiny_model.build(path, log=None)  # the same warm-start as the embedded default
        finally:
            torch.set_num_threads(threads)
    yield path
    if old is None:
        os.environ.pop("MODEL_ROOT", None)
    else:
        os.environ["MODEL_ROOT"] = old
