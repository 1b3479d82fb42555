"""Run state changes are conditional UPDATEs: a duplicate, stale or late actor cannot win."""

import re

import pytest

from webapp.experiments.models import Run


def test_only_one_of_two_claims_wins(queued_run):
    run = queued_run({})
    first, second = Run.objects.get(pk=run.pk), Run.objects.get(pk=run.pk)
    assert first.claim("a", 1, "cpu") is True
    assert second.claim("b", 2, "cpu") is False
    run.refresh_from_db()
    assert (run.status, run.host, run.attempt) == ("running", "a", 1)


def test_a_message_trains_the_first_run_in_the_queue_whichever_run_it_named(queued_run, purge_broker):
    """The broker's order is not the queue's (a message sent again goes to its back; one a stopping worker
    held comes back anywhere): the worker takes the run that has waited longest."""
    from worker.training import train_run

    first = queued_run({"not_a_field": 1}, label="first")  # were it claimed, it fails at once on its config
    later = queued_run({"not_a_field": 1}, label="later")
    assert train_run(later.pk) == f"run {first.pk} failed: invalid config"
    assert [Run.objects.get(pk=pk).status for pk in (first.pk, later.pk)] == ["failed", "queued"]
    assert train_run(first.pk) == f"run {later.pk} failed: invalid config"
    assert train_run(first.pk) == "nothing to do: no run is queued"


def test_a_tiny_model_that_cannot_be_built_fails_the_run_saying_why(queued_run, purge_broker, monkeypatch):
    from tests.factories import trainer_config
    from trainer import tiny_model
    from worker.training import train_run

    def full_disk(path=None):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(tiny_model, "ensure", full_disk)
    run = queued_run(trainer_config())  # the tiny model, built on first use
    assert train_run(run.pk) == f"run {run.pk} failed: tiny model build"
    run.refresh_from_db()
    assert run.status == "failed"  # not left queued, sent again by every sweep to fail the same way
    assert run.error == "building the tiny model failed: [Errno 28] No space left on device"


def test_a_run_keeps_its_place_when_sent_again_or_requeued_and_goes_last_when_resumed(
    queued_run, purge_broker
):
    from webapp.runs import queue

    first, second, third = (queued_run({}, label=label) for label in ("1", "2", "3"))
    first.enqueue()  # sent again (the sweeper): not to the back
    assert queue.positions([first.pk, second.pk, third.pk]) == {first.pk: 1, second.pk: 2, third.pk: 3}
    assert first.claim("a", 1, "cpu")
    Run.objects.filter(pk=first.pk).update(eta_seconds=50)
    assert first.requeue("worker shut down")  # its worker stopped
    assert queue.positions([first.pk]) == {first.pk: 1}
    assert first.eta_seconds is None  # that attempt's ETA knew nothing of the wait
    assert first.claim("a", 1, "cpu")
    Run.objects.filter(pk=first.pk).update(eta_seconds=50)
    assert first.finish(Run.Status.STOPPED) and first.eta_seconds is None  # a finished run waits for nothing
    first.resume()  # asked again by its owner: behind the runs already waiting
    assert queue.positions([first.pk, second.pk]) == {second.pk: 1, first.pk: 3}


def test_a_stopped_queued_run_cannot_be_claimed(queued_run):
    run = queued_run({})
    run.request_stop()
    assert run.status == "stopped"
    assert run.claim("a", 1, "cpu") is False
    assert Run.objects.get(pk=run.pk).status == "stopped"


def test_finish_belongs_to_the_attempt_that_claimed(queued_run):
    run = queued_run({})
    run.claim("a", 1, "cpu")
    stale = Run.objects.get(pk=run.pk)
    assert run.requeue("worker lost") and run.claim("b", 2, "cpu")
    assert stale.finish("completed") is False  # attempt 1 is over; attempt 2 owns the run
    assert run.finish("completed") is True
    run.refresh_from_db()
    assert run.status == "completed"
    assert [entry["reason"] for entry in run.attempt_log] == ["worker lost", "completed"]
    assert [entry["host"] for entry in run.attempt_log] == ["a", "b"]


def test_give_up_lists_every_attempt(queued_run):
    run = queued_run({})
    for host in ("a", "b"):
        run.claim(host, 1, "cpu")
        run.requeue(f"no heartbeat from {host}")
    run.claim("c", 1, "cpu")
    Run.objects.filter(pk=run.pk).update(eta_seconds=50)
    last_heard = run.heartbeat_at
    assert run.give_up("no heartbeat from c") is True
    assert run.status == "failed" and run.finished_at == last_heard and run.eta_seconds is None
    assert run.error.splitlines() == [
        "gave up after 3 attempts:",
        "attempt 1 on a: no heartbeat from a",
        "attempt 2 on b: no heartbeat from b",
        "attempt 3 on c: no heartbeat from c",
    ]
    assert run.give_up("again") is False


def test_a_run_asked_to_stop_is_not_requeued(queued_run):
    """A worker shutting down while the user clicks Stop: the run ends stopped, never queued again
    (a queued run with a stop request would be skipped by every worker and the sweeper)."""
    run = queued_run({})
    run.claim("a", 1, "cpu")
    run.request_stop()
    assert run.requeue("worker shut down") is False
    assert Run.objects.get(pk=run.pk).status == "running"
    assert run.finish("stopped") is True


def test_a_resumed_runs_duration_and_speed_count_its_attempts_not_the_downtime(queued_run):
    from datetime import timedelta

    from django.utils import timezone

    from webapp.compare.aggregates import steps_per_hour
    from webapp.runs import table

    run = queued_run({})
    run.claim("a", 1, "cpu")
    t0 = timezone.now() - timedelta(hours=3)  # attempt 1: 10 minutes, then the server was off for 2 h
    Run.objects.filter(pk=run.pk).update(started_at=t0, heartbeat_at=t0 + timedelta(minutes=10), step=25)
    run.refresh_from_db()
    assert run.requeue("worker shut down")
    # waiting in the queue (2 hours here) is no training: a tester saw the runs table's duration grow
    assert run.training_time == timedelta(minutes=10)
    assert table.with_summary(Run.objects.filter(pk=run.pk)).get().duration == timedelta(minutes=10)
    assert run.claim("b", 2, "cpu")
    t1 = t0 + timedelta(hours=2, minutes=10)  # attempt 2: 6 minutes, to step 50
    Run.objects.filter(pk=run.pk).update(started_at=t1, heartbeat_at=t1 + timedelta(minutes=6), step=50)
    run.refresh_from_db()
    assert run.finish("completed")
    Run.objects.filter(pk=run.pk).update(finished_at=t1 + timedelta(minutes=6))
    run.refresh_from_db()
    assert run.training_time == timedelta(minutes=16)
    assert table.with_summary(Run.objects.filter(pk=run.pk)).get().duration == timedelta(minutes=16)
    assert round(steps_per_hour(run)) == round(50 / (16 / 60))


def test_a_pool_child_forked_while_its_worker_shuts_down_leaves_the_run_queued(
    queued_run, purge_broker, monkeypatch
):
    # A warm shutdown sets state.should_stop (to exit code 0) in the worker; its forks inherit it.
    from celery.worker import state

    from worker.sweeper import gpu_queue_depth
    from worker.training import train_run

    run = queued_run({"not_a_field": 1})  # were it claimed, it would fail at once on its config, not train
    monkeypatch.setattr(state, "should_stop", 0)
    assert train_run(run.pk) == "worker shutting down: left queued"
    run.refresh_from_db()
    assert (run.status, run.attempt, run.enqueued_at is not None) == ("queued", 0, True)
    assert gpu_queue_depth() == 1  # sent again for the next worker


def test_a_stopped_run_resumes_with_its_steps_its_training_time_and_fresh_attempts(queued_run, purge_broker):
    from datetime import timedelta

    from django.utils import timezone

    from webapp.runs import table

    run = queued_run({})
    run.claim("a", 1, "cpu")
    started = timezone.now() - timedelta(hours=1)
    Run.objects.filter(pk=run.pk).update(started_at=started, step=12)
    run.request_stop()
    run.refresh_from_db()
    assert run.finish("stopped")
    Run.objects.filter(pk=run.pk).update(finished_at=started + timedelta(minutes=10))
    run.refresh_from_db()

    run.resume()
    run.refresh_from_db()
    assert (run.status, run.stop_requested, run.finished_at, run.step) == ("queued", False, None, 12)
    assert (run.attempt, run.resumed_at_attempt) == (1, 1)
    assert run.earlier_training == timedelta(minutes=10)
    assert run.attempt_log[-1]["reason"].startswith("stopped; resumed ")
    assert run.enqueued_at is not None  # sent to the gpu queue

    def durations():  # the run's training time, as its page and as the runs table (and API) say it
        summary = table.with_summary(Run.objects.filter(pk=run.pk)).get()
        return Run.objects.get(pk=run.pk).training_time, summary.duration

    # Waiting in the queue adds nothing (it counted the hour since its first start, downtime included)
    assert durations() == (timedelta(minutes=10), timedelta(minutes=10))

    # Stopped again before a worker took it, and resumed again: the log says both (a tester saw
    # "stopped; resumed ...; resumed ..."), and the first attempt's time stays (the table said none).
    run.request_stop()
    assert durations() == (timedelta(minutes=10), timedelta(minutes=10))
    run.resume()
    run.refresh_from_db()
    assert re.fullmatch(
        r"stopped; resumed [-\d :]+ UTC; stopped in the queue [-\d :]+ UTC; resumed [-\d :]+ UTC",
        run.attempt_log[-1]["reason"],
    )
    assert run.claim("b", 2, "cpu") and run.attempt == 2

    with pytest.raises(Run.NotResumable, match="is running: only a stopped or failed run can be resumed"):
        run.resume()
    assert Run.objects.get(pk=run.pk).status == "running"


def test_a_run_trained_elsewhere_is_not_resumed(queued_run):
    run = queued_run({})
    run.experiment.imported = True
    run.experiment.save()
    Run.objects.filter(pk=run.pk).update(status="failed")
    run.refresh_from_db()
    with pytest.raises(Run.TrainedElsewhere, match="cannot resume it"):
        run.resume()
    assert Run.objects.get(pk=run.pk).status == "failed"


def test_a_requeued_run_stopped_in_the_queue_and_resumed_counts_its_time_once(queued_run, purge_broker):
    from datetime import timedelta

    from django.utils import timezone

    run = queued_run({})
    run.claim("a", 1, "cpu")
    started = timezone.now() - timedelta(hours=2)
    Run.objects.filter(pk=run.pk).update(started_at=started, heartbeat_at=started + timedelta(minutes=10))
    run.refresh_from_db()
    assert run.requeue("worker shut down")
    run.request_stop()  # stopped while queued again, an hour and more later
    assert run.training_time == timedelta(minutes=10)
    run.resume()
    run.refresh_from_db()
    assert run.earlier_training == timedelta(minutes=10)  # not the 2 hours since the attempt started


def test_giving_up_after_a_resume_counts_the_attempts_since(queued_run, purge_broker):
    run = queued_run({})
    run.claim("a", 1, "cpu")
    assert run.give_up("no heartbeat")
    run.resume()
    run.claim("b", 2, "cpu")
    assert run.give_up("no heartbeat again")
    assert run.error.splitlines() == ["gave up after 1 attempt:", "attempt 2 on b: no heartbeat again"]
