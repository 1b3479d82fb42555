"""The sweeper (celery beat, every RUN_SWEEP_EVERY seconds): Postgres says what should be happening,
the sweeper makes the broker agree.

- A running run whose heartbeat is older than RUN_HEARTBEAT_TIMEOUT lost its worker (killed, machine
  gone, OOM): it is queued again and re-sent; the next worker resumes from its last checkpoint. After
  RUN_MAX_ATTEMPTS attempts lost so (a worker shutting down cleanly loses none) it is failed instead,
  with every attempt's reason in the error.
- When a worker starts, the runs its host was training whose process is gone are recovered the same way
  at once (recover_orphans).
- A queued run that was never sent (broker down at submit time) is sent.
- A queued run sent more than RUN_RESEND_AFTER seconds ago is sent again when its message may be lost:
  when the gpu queue holds fewer messages than there are queued runs (a broker restart without
  persistence empties it). Runs waiting their turn behind busy GPUs are not re-sent over and over.
- A notification whose sender vanished mid-send (`sending` for NOTIFY_SENDING_TIMEOUT) goes back to pending
  and is sent again, under the same Message-ID. A pending one is sent again when its message may be lost:
  RUN_RESEND_AFTER seconds after it was created, or after its next_try_at (a retry waits for its backoff).
- A run logged through the MLflow endpoint (webapp/tracking) has no worker to requeue: after
  MLFLOW_LOST_AFTER seconds without a call from its client it is marked lost (failed). One with steps
  the detector has not judged (its message was lost) is sent to the detector again.

Every message it sends may be a duplicate; the receiving task's atomic claim makes that harmless (a
training message finds the queue empty, or trains the next run, which has a message of its own too).
"""

import logging
import os
from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from webapp.alerts.models import Notification, send_later
from webapp.experiments.models import Run
from webapp.tracking.models import ExternalRun
from worker import queues

logger = logging.getLogger(__name__)


def gpu_queue_depth() -> int | None:
    """Messages waiting in the gpu queue, or None when the broker cannot say."""
    from worker.celery import app

    try:
        with app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1)
            try:
                return conn.default_channel.queue_declare(queues.GPU, passive=True).message_count
            except conn.channel_errors:  # the queue does not exist: nothing is waiting in it
                return 0
    except Exception as error:  # broker unreachable
        logger.warning("sweeper: cannot read the gpu queue: %s", error)
        return None


def recover(run: Run, reason: str, counts: dict) -> None:
    """A running run whose worker is gone: stopped if a stop was asked, failed once its attempts are used
    up, else queued again and re-sent (the next worker resumes from its last checkpoint)."""
    if run.stop_requested:
        counts["stopped"] += run.finish(Run.Status.STOPPED, error=f"stopped; {reason}")
    elif run.lost_attempts(run.attempt_log) + 1 >= settings.RUN_MAX_ATTEMPTS:  # + the one lost now
        counts["failed"] += run.give_up(reason)
    elif run.requeue(reason):
        logger.info("sweeper: run %s requeued after attempt %s: %s", run.pk, run.attempt, reason)
        counts["requeued"] += 1
        counts["sent"] += run.enqueue()


def recover_orphans(host: str) -> dict:
    """When a worker starts on `host`: the runs `host` was training whose process is gone (a worker killed
    with SIGKILL, or out of memory) are recovered now, not RUN_HEARTBEAT_TIMEOUT later. A process id is only
    meaningful in its own boot of its machine and its own PID namespace (pid_namespace: containers, and
    machines, may share a host name): runs of another, or of an unknown one, wait for the heartbeat rule;
    so do those of a machine that rebooted (a power cut), whose boot id has changed."""
    counts = {"requeued": 0, "failed": 0, "stopped": 0, "sent": 0}
    namespace = pid_namespace()
    if not namespace:
        return counts
    running_here = Run.objects.filter(
        status=Run.Status.RUNNING, mlflow__isnull=True, host=host, pid_namespace=namespace
    )
    for run in running_here:
        if run.pid is None or not process_exists(run.pid):
            recover(run, f"worker lost: its process on {host} (pid {run.pid}) is gone", counts)
    return counts


def pid_namespace() -> str:
    """Where this process's id means this process: its machine's boot and its PID namespace
    ("<boot id> pid:[4026531836]"), "" where /proc cannot say. The namespace alone is not enough: every
    machine's first one has the same number, so two machines given one host name would each find the
    other's training processes gone."""
    try:
        with open("/proc/sys/kernel/random/boot_id") as boot:
            return f"{boot.read().strip()} {os.readlink('/proc/self/ns/pid')}"
    except OSError:
        return ""


def process_exists(pid: int) -> bool:
    """Whether `pid` is a live process here. A zombie is not: a worker killed with its training child
    leaves the child dead but unreaped until init gets to it (in a container, maybe never), and a signal
    0 still reaches a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive, or /proc says otherwise below
        pass
    try:
        with open(f"/proc/{pid}/stat") as stat:
            state = stat.read().rsplit(")", 1)[1].split()[0]  # after the name, which may hold spaces
    except FileNotFoundError:
        return False  # gone since
    except (OSError, IndexError):
        return True  # no /proc to ask: signal 0 is all there is
    return state not in ("Z", "X")


def sweep_runs() -> dict:
    from webapp.tracking.models import send_detection

    now = timezone.now()
    counts = {
        "requeued": 0,
        "failed": 0,
        "stopped": 0,
        "sent": 0,
        "notifications": 0,
        "lost": 0,
        "detections": 0,
    }

    silent = ExternalRun.objects.select_related("run").filter(
        run__status=Run.Status.RUNNING,
        run__heartbeat_at__lt=now - timedelta(seconds=settings.MLFLOW_LOST_AFTER),
    )
    for external in silent:
        counts["lost"] += external.mark_lost(settings.MLFLOW_LOST_AFTER)
    for run_id in ExternalRun.behind().values_list("pk", flat=True):
        counts["detections"] += send_detection(run_id)

    stale = Run.objects.filter(
        status=Run.Status.RUNNING,
        mlflow__isnull=True,
        heartbeat_at__lt=now - timedelta(seconds=settings.RUN_HEARTBEAT_TIMEOUT),
    )
    for run in stale:
        since = run.heartbeat_at.strftime("%Y-%m-%d %H:%M:%S UTC")
        recover(
            run, f"worker lost: no heartbeat from {run.host or '?'} (pid {run.pid}) since {since}", counts
        )

    queued = Run.objects.filter(status=Run.Status.QUEUED, stop_requested=False)
    for run in queued.filter(enqueued_at__isnull=True):
        counts["sent"] += run.enqueue()
    overdue = list(queued.filter(enqueued_at__lt=now - timedelta(seconds=settings.RUN_RESEND_AFTER)))
    if overdue:
        depth = gpu_queue_depth()
        if depth is None or depth < queued.count():
            for run in overdue:
                counts["sent"] += run.enqueue()

    released = Notification.release_stuck()
    for notification_id in released:
        counts["notifications"] += send_later(notification_id)
    lost_notifications = Notification.due(settings.RUN_RESEND_AFTER).exclude(pk__in=released)
    for notification_id in lost_notifications.values_list("pk", flat=True):
        counts["notifications"] += send_later(notification_id)
    if any(counts.values()):
        logger.info("sweeper: %s", counts)
    return counts
