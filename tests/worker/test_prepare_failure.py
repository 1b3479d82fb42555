"""A failure after a run is claimed and before its training starts (a full disk while the worker clears its
old checkpoints, say) is a lost attempt, said at once: the run sat as "running" with a stale heartbeat until
the sweeper called it a lost worker. Queued again (for another worker) until RUN_MAX_ATTEMPTS, as the
sweeper counts, not failed by the one broken worker that took it."""

import errno

import pytest

from tests.factories import make_run, make_user
from trainer import checkpoint
from webapp.experiments.models import Run
from worker import training

FULL = "OSError: [Errno 28] No space left on device"


@pytest.fixture
def disk_full(monkeypatch):
    def drop_after(out_dir, step):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint, "drop_after", drop_after)


def test_a_failure_before_training_queues_the_run_again_saying_why(db, disk_full, settings):
    settings.RUN_MAX_ATTEMPTS = 3
    run = make_run(make_user("owner", "pw-owner-123"), status=Run.Status.RUNNING, attempt=1, host="gpu-1")
    said = training.train_claimed(run, cfg=None, worker_gone=lambda: False)

    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED and said.startswith(f"not started ({FULL})")
    assert run.attempt_log[-1]["reason"].endswith(f"could not start it: {FULL}")


def test_the_last_attempt_lost_so_fails_the_run_with_its_message(db, disk_full, settings):
    settings.RUN_MAX_ATTEMPTS = 1
    run = make_run(make_user("owner", "pw-owner-123"), status=Run.Status.RUNNING, attempt=1, host="gpu-1")
    training.train_claimed(run, cfg=None, worker_gone=lambda: False)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.finished_at is not None
    assert run.error.endswith(f"could not start it: {FULL}")
