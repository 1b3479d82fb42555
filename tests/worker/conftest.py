"""Fixtures for the worker tests: queued runs, and gpu
workers started as the operations guide says (concurrency 1, prefetch 1, one run per child)."""

import pytest

from tests.factories import make_experiment, make_run, make_user


@pytest.fixture
def checkpoint_root(settings, tmp_path):
    settings.CHECKPOINT_ROOT = tmp_path / "checkpoints"
    return settings.CHECKPOINT_ROOT


@pytest.fixture
def queued_run(transactional_db):
    """queued_run(config, **experiment_fields) -> a queued Run (not sent), all of one owner."""
    owner = make_user("owner", "pw-owner-123")

    def make(config, label="seed 0", **experiment_fields):
        experiment = make_experiment(owner, name="exp", config=config, seeds=[0], **experiment_fields)
        return make_run(owner, experiment=experiment, label=label, config=config)

    return make


@pytest.fixture
def start_gpu_worker(start_worker, checkpoint_root, purge_broker):
    """A gpu worker as docs/OPERATIONS.md starts one, on one CPU thread, with the test checkpoint root."""

    def start(name="gpu0", **env):
        return start_worker(
            "gpu",
            name=name,
            extra_args=("--max-tasks-per-child", "1"),
            ECHOLAB_THREADS=1,
            CHECKPOINT_ROOT=checkpoint_root,
            **env,
        )

    return start
