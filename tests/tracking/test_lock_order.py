"""The lock order of webapp/tracking (its module docstring): no transaction holds an MLflow run's record
(its ExternalRun row) while it waits for the run's row, which every writer locks first. A detection or a
delete that did (both once locked the record first) deadlocked with a script's tag call or a batch of
points for a run that had been lost: each side waiting for the row the other held, until Postgres
aborted one of them."""

import threading
from contextlib import contextmanager

import pytest
from django.db import connection, transaction
from django.utils import timezone

from tests.helpers import in_thread, other_connection, wait_until_finished_or_waiting_for_a_lock
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Experiment, Run
from webapp.metrics import ingest
from webapp.tracking.models import ExternalExperiment, ExternalRun
from worker import external

OVERRIDES = {"zero_std_groups": {"threshold": 0.5, "min_rise": 0.0, "pending": 1, "smoothing": 0.0}}


@pytest.fixture
def ended_run(transactional_db, alice, purge_broker):
    """An ended MLflow run whose one step the detector will call a warning once judged."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks: Postgres")
    experiment = ExternalExperiment.create(alice, "hand-written loop")
    Experiment.objects.filter(pk=experiment.experiment_id).update(detector_overrides=OVERRIDES)
    external._hooks.clear()
    run = ExternalRun.start(experiment, "loop", {}, "alice", timezone.now())
    run.log([("frac_reward_zero_std", 1.0, 0, None)], {}, {})
    run.update("FINISHED", None, "")
    return run


def detect_with_alerts_on_warnings(run: ExternalRun) -> None:
    Experiment.objects.filter(runs=run.pk).update(alert_on_warnings=True)
    external.detect(run.pk)


PATHS = {
    # The cooldown's check locks the run's row before the email is recorded.
    "a detection that emails": detect_with_alerts_on_warnings,
    # Only the event's foreign key check, at commit, touches the run's row.
    "a detection with nobody to tell": lambda run: external.detect(run.pk),
    "a delete": lambda run: Run.objects.filter(pk=run.pk).delete_with_data(),
}


@contextmanager
def batch_held_open(run: ExternalRun):
    """A batch of points written as the MLflow endpoint writes it (the run's row locked, then the points),
    its transaction held open meanwhile."""
    holding, release = threading.Event(), threading.Event()

    def write_and_hold():
        with transaction.atomic():
            ingest.write(run.pk, [(1, "train/reward_mean", 0.5)], finished_ok=True)
            holding.set()
            release.wait(30)

    writer, errors = in_thread(write_and_hold)
    try:
        assert holding.wait(20)
        yield
    finally:
        release.set()
        writer.join(20)
    assert not writer.is_alive() and errors == []


@pytest.mark.parametrize("path", PATHS)
def test_while_a_batch_of_points_holds_the_runs_row_nothing_holds_its_mlflow_record(ended_run, path):
    with batch_held_open(ended_run), other_connection() as observer:
        other, errors = in_thread(lambda: PATHS[path](ended_run))
        wait_until_finished_or_waiting_for_a_lock(other, observer)
        # What the writer's next step (its tags, or a lost run's lost_at) would lock: free.
        observer.execute(
            "SELECT 1 FROM tracking_externalrun WHERE run_id = %s FOR NO KEY UPDATE NOWAIT", [ended_run.pk]
        )
    other.join(20)
    assert not other.is_alive() and errors == []
    if path == "a delete":
        assert not Run.objects.filter(pk=ended_run.pk).exists()
    else:
        assert DetectorEvent.objects.filter(run_id=ended_run.pk, rule="zero_std_groups").exists()


def test_a_detection_with_nobody_to_tell_does_not_wait_for_a_writer(ended_run):
    """A writer's lock on the run's row leaves its events' foreign key checks alone (FOR NO KEY UPDATE),
    so the detector waits for a batch only when it has an email to record."""
    with batch_held_open(ended_run):
        detection, errors = in_thread(lambda: external.detect(ended_run.pk))
        detection.join(20)
        assert not detection.is_alive() and errors == []
