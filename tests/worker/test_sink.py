"""DatabaseSink in this process against the real Postgres: batches, idempotent rewrites, progress,
heartbeat, ownership, and a buffer that survives a database outage."""

import math

import pytest
from django.db import connection

from tests.helpers import postgres_cluster, wait_for
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint, Sample, StepRecord
from worker.sink import DatabaseSink


@pytest.fixture
def running_run(queued_run):
    run = queued_run({})
    assert run.claim("here", 1, "cpu")
    return run


def points(run):
    return {(p.step, p.key): p.value for p in MetricPoint.objects.filter(run=run)}


class RecordingHook:
    def __init__(self):
        self.steps = []

    def on_step(self, run, step, metrics):
        self.steps.append((step, metrics))


def test_writes_metrics_samples_progress_and_heartbeat(running_run):
    hook = RecordingHook()
    sink = DatabaseSink(running_run, hook=hook, flush_interval=60)
    before = Run.objects.get(pk=running_run.pk).heartbeat_at
    for step in range(3):
        sink.metrics(step, {"train/success": step / 10, "actor/grad_norm": float("nan")})
        sink.samples(step, [{"answer": "Left\x00", "reward": 1.0}, {"answer": "Up", "reward": float("inf")}])
        sink.progress(step + 1, 5)
    # progress() wakes the flusher: rows arrive without waiting for the 60 s interval or close().
    wait_for(
        lambda: MetricPoint.objects.filter(run=running_run).count() == 6, timeout=10, message="metric rows"
    )
    sink.close()

    stored = points(running_run)
    assert stored[(2, "train/success")] == pytest.approx(0.2)
    assert math.isnan(stored[(1, "actor/grad_norm")])
    assert Sample.objects.filter(run=running_run).count() == 6
    assert Sample.objects.get(run=running_run, step=1, index=1).data == {"answer": "Up", "reward": None}
    # Postgres JSON refuses NUL characters; a collapsing model writes them.
    assert Sample.objects.get(run=running_run, step=1, index=0).data["answer"] == "Left\ufffd"
    run = Run.objects.get(pk=running_run.pk)
    assert (run.step, run.total_steps) == (3, 5)
    assert run.eta_seconds is not None and run.eta_seconds >= 0
    assert run.heartbeat_at > before
    assert run.latest_metrics == {"train/success": pytest.approx(0.2), "actor/grad_norm": None}
    assert [step for step, _ in hook.steps] == [0, 1, 2]
    assert sink.stored_step() == 3  # what the trainer's checkpoint pruning keeps a checkpoint for


def test_the_stored_step_moves_only_with_what_was_committed(running_run):
    sink = DatabaseSink(running_run, flush_interval=60)
    assert sink.stored_step() == 0
    sink.metrics(0, {"loss": 1.0})
    sink.progress(1, 5)
    assert sink.flush()
    assert sink.stored_step() == 1
    Run.objects.get(pk=running_run.pk).requeue("worker lost")  # another attempt's from here
    sink.metrics(1, {"loss": 0.5})
    sink.progress(2, 5)
    sink.close()
    assert sink.lost and sink.stored_step() == 1


def test_a_recomputed_step_overwrites_its_rows(running_run):
    first = DatabaseSink(running_run, flush_interval=60)
    first.metrics(0, {"loss": 1.0})
    first.metrics(1, {"loss": 2.0})
    first.close()
    second = DatabaseSink(running_run, flush_interval=60)
    second.metrics(1, {"loss": 3.0})
    second.close()
    assert points(running_run) == {(0, "loss"): 1.0, (1, "loss"): 3.0}


def test_records_are_written_whole_and_a_recomputed_step_replaces_its_record(running_run):
    first = DatabaseSink(running_run, flush_interval=60)
    first.records(0, "train/reward_std_hist", [0.5, 0.0, math.nan])
    first.records(1, "train/reward_std_hist", [0.25])
    first.close()
    second = DatabaseSink(running_run, flush_interval=60)
    second.records(1, "train/reward_std_hist", [0.75, 0.1])
    second.close()
    stored = StepRecord.objects.filter(run=running_run).order_by("step").values_list("step", "key", "values")
    assert list(stored) == [
        (0, "train/reward_std_hist", [0.5, 0.0, None]),  # NaN has no JSON spelling
        (1, "train/reward_std_hist", [0.75, 0.1]),
    ]


def test_writes_nothing_once_another_attempt_owns_the_run(running_run):
    sink = DatabaseSink(running_run, flush_interval=60)
    assert sink.should_stop() is False
    Run.objects.get(pk=running_run.pk).requeue("worker lost")  # the sweeper gave up on this attempt
    sink.metrics(0, {"loss": 1.0})
    sink.close()
    assert sink.lost and sink.should_stop()
    assert not MetricPoint.objects.filter(run=running_run).exists()


def test_should_stop_follows_the_stop_request(running_run):
    sink = DatabaseSink(running_run, flush_interval=60)
    assert sink.should_stop() is False
    Run.objects.get(pk=running_run.pk).request_stop()
    assert sink.should_stop() is True
    sink.close()


@pytest.mark.stops_services
@pytest.mark.slow
def test_buffer_survives_a_postgres_restart(running_run):
    sink = DatabaseSink(running_run, flush_interval=0.2)
    sink.metrics(0, {"loss": 0.0})
    sink.progress(1, 10)
    wait_for(lambda: MetricPoint.objects.filter(run=running_run).exists(), timeout=10, message="first row")
    try:
        postgres_cluster("stop", "-m", "fast")
        for step in range(1, 4):  # the trainer goes on while the database is down
            sink.metrics(step, {"loss": float(step)})
            sink.samples(step, [{"answer": "Left"}])
            sink.progress(step + 1, 10)
        wait_for(lambda: sink.last_error is not None, timeout=10, message="a failed flush")
        assert sink.should_stop() is False  # the last known answer, not an exception
    finally:
        postgres_cluster("start")
    connection.close()
    sink.close(timeout=60)
    assert points(running_run) == {(step, "loss"): float(step) for step in range(4)}
    assert Sample.objects.filter(run=running_run).count() == 3
    assert Run.objects.get(pk=running_run.pk).step == 4
