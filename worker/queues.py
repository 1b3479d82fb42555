"""Queue and task names, and how a message is sent: one place for the web app, the sweeper and the worker.

`gpu` takes training (one run at a time per worker); `default` takes emails, detection of runs trained
elsewhere, and housekeeping.
"""

import logging

logger = logging.getLogger(__name__)

GPU, DEFAULT = "gpu", "default"
TRAIN_RUN = "worker.tasks.train_run"
SEND_NOTIFICATION = "worker.tasks.send_notification"
DETECT_EXTERNAL_RUN = "worker.tasks.detect_external_run"
SWEEP_RUNS = "worker.tasks.sweep_runs"  # sent by celery beat (settings.CELERY_BEAT_SCHEDULE)
PING = "worker.tasks.ping"  # the wiring check's round trip through a worker

# Connecting to the broker is retried briefly (about 2 s in all): with the broker down the caller goes on,
# its record stays unsent in Postgres, and the sweeper sends it later.
RETRY_POLICY = {"max_retries": 2, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 1}


def send(task: str, args: list, queue: str, eta=None) -> bool:
    """Send one message, to be run at `eta` (a datetime) if given; False (logged, not raised) when the broker
    is unreachable."""
    from worker.celery import app

    try:
        app.send_task(task, args=args, queue=queue, eta=eta, retry=True, retry_policy=RETRY_POLICY)
    except Exception as error:  # kombu raises several unrelated types for "broker unreachable"
        logger.warning(
            "%s%s not sent, broker unreachable (%s); the sweeper sends it later", task, args, error
        )
        return False
    return True


def listeners(queue: str, timeout: float = 1.0) -> list[str] | None:
    """The workers that answer a broadcast within `timeout` s and consume `queue`; None when the broker
    cannot broadcast (unreachable, or the embedded filesystem broker, which has no broadcast)."""
    from django.conf import settings

    from worker.celery import app

    if settings.CELERY_BROKER_URL.startswith("filesystem:"):  # no broadcast: no answer, whoever listens
        return None
    try:
        answers = app.control.inspect(timeout=timeout).active_queues() or {}
    except Exception as error:  # as in send(): kombu raises several types for "broker unreachable"
        logger.warning("cannot ask the workers which queues they consume: %s", error)
        return None
    return sorted(
        worker for worker, consumed in answers.items() if any(q.get("name") == queue for q in consumed)
    )
