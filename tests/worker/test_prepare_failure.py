"""A failure after a run is claimed and before its training starts (a full disk while the worker clears its
old checkpoints, say) fails the run at once with its message: it sat as "running" with a stale heartbeat
until the sweeper called it a lost worker, and a worker that failed so took every run in turn."""

import errno

from tests.factories import make_run, make_user
from trainer import checkpoint
from webapp.experiments.models import Run
from worker import training


def test_a_failure_before_training_fails_the_run_with_its_message(db, monkeypatch):
    run = make_run(make_user("owner", "pw-owner-123"), status=Run.Status.RUNNING, attempt=2, step=3)

    def disk_full(out_dir, step):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(checkpoint, "drop_after", disk_full)
    said = training.train_claimed(run, cfg=None, worker_gone=lambda: False)

    run.refresh_from_db()
    assert run.status == Run.Status.FAILED and run.finished_at is not None
    assert run.error == "OSError: [Errno 28] No space left on device"
    assert said == "failed: OSError: [Errno 28] No space left on device"
