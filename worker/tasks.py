"""Celery tasks: the glue between the trainer, the detector and the database.

A message only says "go look at the rows"; Postgres holds the state, and each task starts by claiming a
row with a conditional UPDATE (a training message: the first run in the queue, whichever run it was sent
for), so a duplicated, stale or re-sent message never does the work twice.
Nothing here imports torch: the worker's parent process must never initialise CUDA.
"""

import logging
import smtplib
import socket

from worker import queues
from worker.celery import app

logger = logging.getLogger(__name__)


@app.task(name=queues.PING)
def ping(nonce: str, queue: str = queues.DEFAULT) -> None:
    from webapp.core.models import WorkerPing

    WorkerPing.objects.get_or_create(nonce=nonce, defaults={"hostname": socket.gethostname(), "queue": queue})


@app.task(name=queues.TRAIN_RUN)
def train_run(run_id: int) -> str:
    """Train the first run in the queue (gpu queue; sent for run `run_id`); see worker/training.py."""
    from worker.training import train_run as train

    outcome = train(run_id)
    logger.info("train message for run %s -> %s", run_id, outcome)
    return outcome


@app.task(name=queues.DETECT_EXTERNAL_RUN)
def detect_external_run(run_id: int) -> int:
    """Run the Echo Trap detector over the new steps of a run logged through the MLflow endpoint."""
    from worker.external import detect

    return detect(run_id)


@app.task(name=queues.SWEEP_RUNS)
def sweep_runs() -> dict:
    """Re-send lost runs and notifications, requeue runs whose worker died; see worker/sweeper.py."""
    from webapp.core.models import WorkerPing
    from worker.sweeper import sweep_runs as sweep

    counts = sweep()
    WorkerPing.sweeper_ran()  # /healthz?workers=1 says when this stops: beat or the default workers are down
    return counts


@app.task(name=queues.SEND_NOTIFICATION, bind=True, max_retries=None)  # retry_delays() decides
def send_notification(self, notification_id: int) -> str:
    """Email a run's alert (or its failure) to the recipients: claimed once, retried with backoff
    (Notification.retry_delays, next_try_at; the sweeper re-sends a retry whose message was lost), then
    failed.
    The message itself (templates, chart) is webapp.alerts.emails'."""
    from webapp.alerts import emails
    from webapp.alerts.models import Notification, send_later

    notification = (
        Notification.objects.select_related("run__experiment", "event").filter(pk=notification_id).first()
    )
    if notification is None:
        return "nothing to do"
    if not notification.claim():
        if notification.is_gathering:
            # Early: the sender's clock is ahead of this machine's. Again at its time, by this clock.
            send_later(notification.pk, notification.next_try_at)
            return "not due yet"
        if notification.status == Notification.Status.PENDING:  # a retry's second message, before its time
            return f"not due yet: its retry is due at {notification.next_try_at:%H:%M:%S} UTC"
        return "nothing to do"
    if not notification.take_current_settings():  # the alert settings may have changed while it waited
        return "nothing to tell: warnings are no longer emailed"
    via = emails.destination()  # before sending: nothing that can fail comes after it
    try:
        notification.deliver()
    except (smtplib.SMTPException, OSError) as error:
        reason = f"{type(error).__name__}: {error} ({via})"
        delay = notification.mark_failed(reason)
        if delay is None:
            logger.warning("notification %s not sent, no tries left: %s", notification.pk, reason)
            return "failed"
        raise self.retry(exc=error, countdown=delay) from error  # Celery's log line then says why
    notification.mark_sent(via)
    return "sent"
