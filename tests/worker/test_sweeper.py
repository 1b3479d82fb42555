"""The sweeper makes the broker agree with Postgres: lost workers, lost messages, lost notifications."""

import os
import socket
import subprocess
from datetime import timedelta

import pytest
from django.utils import timezone

from tests.helpers import wait_for
from webapp.alerts.models import DetectorEvent, Notification
from webapp.experiments.models import Run
from worker.sweeper import gpu_queue_depth, pid_namespace, process_exists, recover_orphans, sweep_runs


@pytest.fixture
def sweeper_settings(settings):
    settings.RUN_HEARTBEAT_TIMEOUT = 60
    settings.RUN_RESEND_AFTER = 120
    settings.RUN_MAX_ATTEMPTS = 3
    return settings


def age(run, **fields_seconds_ago):
    now = timezone.now()
    Run.objects.filter(pk=run.pk).update(
        **{name: now - timedelta(seconds=seconds) for name, seconds in fields_seconds_ago.items()}
    )
    run.refresh_from_db()


def test_a_run_whose_worker_died_is_requeued_and_sent(queued_run, sweeper_settings, purge_broker):
    dead, alive = queued_run({}, label="dead"), queued_run({}, label="alive")
    for run in (dead, alive):
        run.claim("gpu-host-1", 4242, "cpu")
    age(dead, heartbeat_at=61)
    age(alive, heartbeat_at=30)

    counts = sweep_runs()

    assert (counts["requeued"], counts["sent"]) == (1, 1)
    dead.refresh_from_db()
    assert (dead.status, dead.pid, dead.enqueued_at is not None) == ("queued", None, True)
    [entry] = dead.attempt_log
    assert entry["attempt"] == 1
    assert entry["reason"].startswith("worker lost: no heartbeat from gpu-host-1 (pid 4242) since ")
    assert Run.objects.get(pk=alive.pk).status == "running"
    assert gpu_queue_depth() == 1


def lose_every_attempt(run):
    """Three attempts (RUN_MAX_ATTEMPTS), each on its own host, each lost to a stale heartbeat."""
    for attempt in range(1, 4):
        assert run.claim(f"host{attempt}", 1, "cpu")
        age(run, heartbeat_at=61)
        sweep_runs()
        run.refresh_from_db()


def test_after_the_last_attempt_the_run_fails_with_every_reason(queued_run, sweeper_settings, purge_broker):
    run = queued_run({})
    lose_every_attempt(run)
    assert run.status == "failed"
    assert run.attempt == 3
    lines = run.error.splitlines()
    assert lines[0] == "gave up after 3 attempts:"
    assert [line.split(":")[0] for line in lines[1:]] == [
        "attempt 1 on host1",
        "attempt 2 on host2",
        "attempt 3 on host3",
    ]
    assert all("worker lost" in line for line in lines[1:])


def test_a_worker_shutting_down_cleanly_loses_no_attempt(queued_run, sweeper_settings, purge_broker):
    """A laptop user who stops `./echolab run` three times (each a checkpoint and a requeue) and then loses
    the worker once: the run resumes, as the README promises, and is failed only after three lost."""
    run = queued_run({})
    for attempt in range(1, 4):
        assert run.claim(f"host{attempt}", 1, "cpu")
        assert run.requeue(f"{Run.SHUT_DOWN}; checkpointed before step {attempt}")
    for attempt in range(4, 7):
        assert run.claim(f"host{attempt}", 1, "cpu")
        age(run, heartbeat_at=61)
        sweep_runs()
        run.refresh_from_db()
        assert run.status == ("failed" if attempt == 6 else "queued"), attempt
    lines = run.error.splitlines()
    assert lines[0] == "gave up after 3 attempts, 3 more ended by a worker shutting down:"
    assert len(lines) == 7 and lines[1].startswith("attempt 1 on host1: worker shut down; checkpointed")


def test_a_run_its_owner_resumed_gets_its_attempts_afresh(queued_run, sweeper_settings, purge_broker):
    run = queued_run({})
    lose_every_attempt(run)
    assert run.status == "failed"
    run.resume()
    assert run.claim("host4", 1, "cpu")
    age(run, heartbeat_at=61)
    assert sweep_runs()["requeued"] == 1  # attempt 4 in all, the first since it was resumed
    assert Run.objects.get(pk=run.pk).status == "queued"


def test_a_lost_run_that_was_asked_to_stop_is_stopped(queued_run, sweeper_settings, purge_broker):
    run = queued_run({})
    run.claim("host", 1, "cpu")
    run.request_stop()
    age(run, heartbeat_at=61)
    sweep_runs()
    run.refresh_from_db()
    assert run.status == "stopped"
    assert gpu_queue_depth() == 0


def test_queued_runs_are_resent_only_when_their_message_may_be_lost(
    queued_run, sweeper_settings, purge_broker
):
    never_sent, waiting = queued_run({}, label="never sent"), queued_run({}, label="waiting")
    assert waiting.enqueue()
    age(waiting, enqueued_at=121)

    assert sweep_runs()["sent"] == 1  # the never-sent run; the waiting one's message is still queued
    assert Run.objects.get(pk=never_sent.pk).enqueued_at is not None
    assert gpu_queue_depth() == 2

    purge_broker_queues()  # a broker restart without persistence: every message is gone
    age(never_sent, enqueued_at=121)
    age(waiting, enqueued_at=121)
    assert sweep_runs()["sent"] == 2
    assert gpu_queue_depth() == 2


def purge_broker_queues():
    from worker.celery import app

    with app.connection_for_write() as conn:
        conn.default_channel.queue_purge("gpu")


def test_a_notification_left_pending_is_sent_again(queued_run, sweeper_settings, purge_broker):
    run = queued_run({})
    event = DetectorEvent.objects.create(run=run, step=3, level="collapse", rule="collapse", message="m")
    old = Notification.objects.create(run=event.run, event=event, recipients=["a@example.com"])
    Notification.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(seconds=121))
    # A recent one: its message is coming.
    Notification.objects.create(run=event.run, event=event, recipients=["b@example.com"])
    assert sweep_runs()["notifications"] == 1


def test_a_worker_starting_recovers_at_once_the_runs_its_host_lost(
    queued_run, sweeper_settings, purge_broker
):
    gone, here, host = _pid_of_an_ended_process(), pid_namespace(), socket.gethostname()
    labels = ("orphan", "training", "elsewhere", "other container", "other machine")
    orphan, training, elsewhere, other_container, other_machine = (
        queued_run({}, label=label) for label in labels
    )
    orphan.claim(host, gone, "cpu", here)
    training.claim(host, os.getpid(), "cpu", here)  # a live process: still training
    elsewhere.claim("another-host", gone, "cpu", here)  # its process id means nothing here
    boot, namespace = here.split(" ")
    other_container.claim(host, gone, "cpu", f"{boot} pid:[1]")  # same host name, another PID namespace
    # same host name, and the first PID namespace of its machine, which has every machine's number
    other_machine.claim(host, gone, "cpu", f"{'0' * 8}-0000-0000-0000-{'0' * 12} {namespace}")

    counts = recover_orphans(host)

    assert counts == {"requeued": 1, "failed": 0, "stopped": 0, "sent": 1}
    assert [run.status for run in Run.objects.order_by("pk")] == ["queued"] + ["running"] * 4
    orphan.refresh_from_db()
    assert orphan.attempt_log[0]["reason"] == f"worker lost: its process on {host} (pid {gone}) is gone"
    assert gpu_queue_depth() == 1


def _pid_of_an_ended_process() -> int:
    process = subprocess.Popen(["true"])
    process.wait()
    return process.pid


def test_a_killed_process_not_yet_reaped_is_gone():
    child = subprocess.Popen(["sleep", "60"])
    assert process_exists(child.pid)
    child.kill()  # not waited for: a zombie until reaped, and signal 0 still reaches it

    def state():
        with open(f"/proc/{child.pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]

    wait_for(lambda: state() == "Z", timeout=10, message="the child to die")
    assert not process_exists(child.pid)
    child.wait()
    assert not process_exists(child.pid)
