"""Runs trained end to end by real gpu worker processes through Redis into Postgres, with the tiny model:
completion, concurrency, duplicates, stops, a killed worker, a Postgres restart, a broker outage and
bad input."""

import os
import signal
import subprocess
import time

import pytest
from django.db import connection

from tests.factories import tiny_config
from tests.helpers import postgres_cluster, wait_for
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint, Sample
from worker.celery import app
from worker.sweeper import sweep_runs

pytestmark = pytest.mark.slow


def fresh(run) -> Run:
    return Run.objects.get(pk=run.pk)


def wait_status(run, *statuses, timeout=90) -> Run:
    return wait_for(
        lambda: (r := fresh(run)).status in statuses and r,
        timeout=timeout,
        message=f"run {run.pk} to be {' or '.join(statuses)}",
    )


def assert_complete_series(run, steps):
    """Every key at every step 0..steps-1, once (the unique constraint makes 'once' a row count)."""
    rows = list(MetricPoint.objects.filter(run=run).values_list("step", "key"))
    keys = {key for _, key in rows}
    assert "train/success" in keys and "actor/grad_norm" in keys
    assert sorted({step for step, _ in rows}) == list(range(steps))
    assert len(rows) == len(set(rows)) == steps * len(keys)
    assert Sample.objects.filter(run=run).count() == 2 * steps


def test_two_workers_train_two_runs_at_once_into_postgres(queued_run, start_gpu_worker, tiny_model_dir):
    workers = [start_gpu_worker("gpu0"), start_gpu_worker("gpu1")]
    runs = [queued_run(tiny_config(tiny_model_dir, steps=5), label=f"seed {seed}") for seed in (0, 1)]
    for run in runs:
        assert run.enqueue()

    both_running = wait_for(
        lambda: all(fresh(run).status == "running" for run in runs),
        timeout=90,
        message="both runs running together",
    )
    assert both_running
    # Metrics arrive while the run trains, not at the end.
    wait_for(
        lambda: any(
            fresh(run).status == "running" and MetricPoint.objects.filter(run=run).exists() for run in runs
        ),
        timeout=60,
        message="metrics during training",
    )

    finished = [wait_status(run, "completed", "failed", "stopped") for run in runs]
    for run in finished:
        assert run.status == "completed", run.error
        assert_complete_series(run, 5)
        assert (run.step, run.total_steps, run.attempt, run.device) == (5, 5, 1, "cpu")
        assert run.latest_metrics["train/success"] is not None
        assert [entry["reason"] for entry in run.attempt_log] == ["completed"]
    assert len({run.pid for run in finished}) == 2
    assert all("succeeded" in worker.output() for worker in workers)


def test_a_message_delivered_twice_trains_once(queued_run, start_gpu_worker, tiny_model_dir):
    workers = [start_gpu_worker("gpu0"), start_gpu_worker("gpu1")]
    run = queued_run(tiny_config(tiny_model_dir, steps=2))
    for _ in range(2):
        app.send_task("worker.tasks.train_run", args=[run.pk], queue="gpu")

    run = wait_status(run, "completed", "failed")
    assert run.status == "completed" and run.attempt == 1

    def both_deliveries_logged():
        logs = "".join(worker.output() for worker in workers)
        duplicate = f"train message for run {run.pk} -> nothing to do: no run is queued" in logs
        return f"-> run {run.pk}: completed" in logs and duplicate

    # The row says completed before the task logs its outcome: wait for both outcomes, not any two lines.
    wait_for(both_deliveries_logged, timeout=60, message="both deliveries handled")
    logs = "".join(worker.output() for worker in workers)
    assert logs.count(f"run {run.pk}: attempt 1 on") == 1
    assert logs.count(f"-> run {run.pk}: completed") == 1
    assert_complete_series(run, 2)


def test_stop_is_honoured_within_a_step_and_a_stopped_queued_run_never_starts(
    queued_run, start_gpu_worker, tiny_model_dir, checkpoint_root
):
    never = queued_run(tiny_config(tiny_model_dir, steps=3), label="stopped while queued")
    assert never.enqueue()
    never.request_stop()
    run = queued_run(tiny_config(tiny_model_dir, steps=30), label="stopped while running")
    assert run.enqueue()
    start_gpu_worker()

    wait_for(lambda: fresh(run).step >= 2, timeout=90, message="two steps")
    run.request_stop()
    asked_at = fresh(run).step
    run = wait_status(run, "stopped", "completed", "failed")
    assert run.status == "stopped", run.error
    assert run.step <= asked_at + 1
    assert (checkpoint_root / str(run.pk) / "checkpoints" / f"step_{run.step:06d}").is_dir()

    never = fresh(never)
    assert (never.status, never.attempt, never.started_at) == ("stopped", 0, None)
    assert not MetricPoint.objects.filter(run=never).exists()


def test_a_stopped_run_resumed_by_its_owner_continues_from_its_checkpoint(
    queued_run, start_gpu_worker, tiny_model_dir
):
    never = queued_run(tiny_config(tiny_model_dir, steps=2), label="stopped while queued")
    never.request_stop()
    run = queued_run(tiny_config(tiny_model_dir, steps=6), label="stopped while running")
    assert run.enqueue()
    worker = start_gpu_worker()
    wait_for(lambda: fresh(run).step >= 2, timeout=90, message="two steps")
    run.request_stop()
    run = wait_status(run, "stopped", "completed", "failed")
    assert run.status == "stopped", run.error
    stopped_at = run.step

    for resumed in (run, never):
        resumed.resume()
    run, never = wait_status(run, "completed", "failed"), wait_status(never, "completed", "failed")
    assert (run.status, never.status) == ("completed", "completed"), (run.error, never.error)
    assert run.attempt == 2 and "resuming from checkpoint" in worker.output()
    assert f"step_{stopped_at:06d}" in worker.output().split("resuming from checkpoint")[1].splitlines()[0]
    assert_complete_series(run, 6)
    assert never.attempt == 1 and MetricPoint.objects.filter(run=never, key="train/success").count() == 2


def test_a_killed_worker_is_replaced_and_the_run_resumes_from_its_checkpoint(
    queued_run, start_gpu_worker, tiny_model_dir, settings
):
    settings.RUN_HEARTBEAT_TIMEOUT = 2
    run = queued_run(tiny_config(tiny_model_dir, steps=7))
    first = start_gpu_worker("doomed")
    assert run.enqueue()
    wait_for(lambda: fresh(run).step >= 3, timeout=90, message="three steps")
    killed_after = fresh(run).step
    first.kill()  # SIGKILL to the worker and its child: no chance to clean up

    wait_for(lambda: sweep_runs()["requeued"] == 1, timeout=30, message="the sweeper to requeue the run")
    second = start_gpu_worker("heir")
    run = wait_status(run, "completed", "failed")

    assert run.status == "completed", run.error
    assert run.attempt == 2
    assert run.attempt_log[0]["reason"].startswith("worker lost: no heartbeat from")
    assert run.attempt_log[1]["reason"] == "completed"
    assert "resuming from checkpoint" in second.output()
    resumed_at = int(second.output().split("resuming from checkpoint")[1].split("step_")[1][:6])
    # The checkpoint after the last reported step may not have been written before the kill.
    assert resumed_at >= killed_after - 1 >= 2
    assert_complete_series(run, 7)


def test_a_worker_starting_on_the_host_of_a_killed_one_takes_its_run_back_at_once(
    queued_run, start_gpu_worker, tiny_model_dir
):
    # No sweeper and the default heartbeat timeout (minutes): the heir sees the dead process itself.
    run = queued_run(tiny_config(tiny_model_dir, steps=5))
    first = start_gpu_worker("doomed")
    assert run.enqueue()
    wait_for(lambda: fresh(run).step >= 2, timeout=90, message="two steps")
    first.kill()

    heir = start_gpu_worker("heir")
    run = wait_status(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert run.attempt_log[0]["reason"].startswith("worker lost: its process on ")
    assert "resuming from checkpoint" in heir.output()


def test_a_worker_shut_down_mid_run_checkpoints_and_requeues_it_at_once(
    queued_run, start_gpu_worker, tiny_model_dir, checkpoint_root
):
    run = queued_run(tiny_config(tiny_model_dir, steps=7))
    leaving = start_gpu_worker("leaving")
    assert run.enqueue()
    wait_for(lambda: fresh(run).step >= 2, timeout=90, message="two steps")
    leaving.stop()  # SIGTERM to the worker and its training child, as Ctrl-C in ./echolab run sends

    run = fresh(run)
    assert run.status == "queued", (run.status, run.error)
    assert run.attempt_log[0]["reason"] == f"worker shut down; checkpointed before step {run.step}"
    assert (checkpoint_root / str(run.pk) / "checkpoints" / f"step_{run.step:06d}").is_dir()
    heir = start_gpu_worker("heir")  # the message was sent again at once: no sweeper involved
    run = wait_status(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert run.attempt == 2 and "resuming from checkpoint" in heir.output()
    assert_complete_series(run, 7)


@pytest.mark.stops_services
def test_a_postgres_restart_during_a_run_loses_nothing(queued_run, start_gpu_worker, tiny_model_dir):
    run = queued_run(tiny_config(tiny_model_dir, steps=6))
    worker = start_gpu_worker()
    assert run.enqueue()
    wait_for(lambda: fresh(run).step >= 2, timeout=90, message="two steps")
    try:
        postgres_cluster("stop", "-m", "fast")
        time.sleep(3)  # a step or more trains while the database is away
    finally:
        postgres_cluster("start")
    connection.close()

    run = wait_status(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert run.attempt == 1
    assert_complete_series(run, 6)
    assert "database unavailable, keeping" in worker.output()


def stop_redis():
    subprocess.run(["redis-cli", "-p", "6379", "shutdown", "nosave"], check=False, capture_output=True)


def start_redis():
    subprocess.run(
        [
            "redis-server",
            "--daemonize",
            "yes",
            "--bind",
            "127.0.0.1",
            "-::1",
            "--port",
            "6379",
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            "/var/lib/redis",
            "--logfile",
            "/var/log/redis/ci.log",
        ],
        check=True,
    )
    wait_for(
        lambda: (
            subprocess.run(["redis-cli", "-p", "6379", "ping"], capture_output=True).stdout.strip() == b"PONG"
        ),
        timeout=20,
        message="redis to answer",
    )


@pytest.mark.stops_services
def test_a_run_submitted_while_the_broker_is_down_is_sent_by_the_sweeper(
    queued_run, start_gpu_worker, tiny_model_dir, purge_broker
):
    run = queued_run(tiny_config(tiny_model_dir, steps=1))
    try:
        stop_redis()
        assert run.enqueue() is False
        assert fresh(run).enqueued_at is None
        assert sweep_runs()["sent"] == 0  # still down: nothing sent, nothing lost
    finally:
        start_redis()
    assert fresh(run).status == "queued"

    assert sweep_runs()["sent"] == 1
    start_gpu_worker()
    run = wait_status(run, "completed", "failed")
    assert run.status == "completed", run.error
    assert_complete_series(run, 1)


@pytest.mark.parametrize(
    "signalled, started",
    [
        ("after two steps", lambda run: run.step >= 2),
        # Between the claim and the training loop's own handler (the device, the model, the checkpoints)
        # a SIGTERM was ignored: the run trained on to its end (a reviewer's).
        ("as the run is claimed", lambda run: run.status == "running"),
    ],
)
def test_a_worker_signalled_alone_passes_the_stop_on_to_its_training_child(
    queued_run, start_gpu_worker, tiny_model_dir, checkpoint_root, signalled, started
):
    # `docker compose stop` and Kubernetes signal the container's first process only: the run trained on
    # to its end (or to the SIGKILL at the end of the grace period) instead of checkpointing.
    run = queued_run(tiny_config(tiny_model_dir, steps=30))
    alone = start_gpu_worker("alone")
    assert run.enqueue()
    wait_for(lambda: started(fresh(run)), timeout=90, message=signalled)
    os.kill(alone.process.pid, signal.SIGTERM)  # the worker's own process, not its group
    alone.process.wait(timeout=90)

    run = fresh(run)
    assert run.status == "queued", (run.status, run.error)
    assert run.step < 30 and run.attempt_log[0]["reason"].startswith("worker shut down; checkpointed")
    assert (checkpoint_root / str(run.pk) / "checkpoints" / f"step_{run.step:06d}").is_dir()


def test_bad_config_and_unreachable_model_fail_at_once_with_their_message(
    queued_run, start_gpu_worker, tiny_model_dir, settings
):
    invalid = tiny_config(tiny_model_dir, steps=2)
    invalid["rollout"]["group_size"] = 1  # grpo needs groups of 2 or more
    invalid_run = queued_run(invalid, label="invalid")
    missing = tiny_config(tiny_model_dir, steps=2)
    missing["model"]["name"] = "/nonexistent/models/qwen"
    missing_run = queued_run(missing, label="missing model")
    start_gpu_worker()
    for run in (invalid_run, missing_run):
        assert run.enqueue()

    invalid_run = wait_status(invalid_run, "failed", "completed")
    assert invalid_run.error.startswith("invalid config: rollout.group_size: must be >= 2")
    assert invalid_run.device == ""  # refused before the model or the device were touched
    missing_run = wait_status(missing_run, "failed", "completed")
    # Outside MODEL_ROOT: the worker's resolver refuses it, in words that do not say whether it exists.
    assert missing_run.error == (
        "invalid config: model.name: there is no model folder '/nonexistent/models/qwen' "
        "inside MODEL_ROOT (local models are folders inside MODEL_ROOT)"
    )
    assert missing_run.device == ""  # refused before the model was loaded
    settings.RUN_HEARTBEAT_TIMEOUT = 1
    time.sleep(1.5)
    sweep_runs()  # a failed run is final: nothing is retried
    for run in (invalid_run, missing_run):
        assert fresh(run).status == "failed" and fresh(run).attempt == 1
