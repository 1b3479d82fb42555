"""The Celery app. Two queues: `gpu` (training, one run at a time per worker) and `default`
(emails, housekeeping). Settings come from Django's settings, CELERY_* names."""

import contextlib
import logging
import os
import signal
import threading

from billiard.process import active_children
from celery import Celery
from celery.signals import worker_init, worker_process_init, worker_ready, worker_shutting_down
from kombu import Queue

from worker import queues

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
logger = logging.getLogger(__name__)

app = Celery("echolab", include=["worker.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue(queues.DEFAULT), Queue(queues.GPU))


# Set in a pool child when SIGTERM reaches it while it has a task (worker/training.py installs the handler
# that sets it: billiard replaces any handler but SIG_IGN after worker_process_init), read before a claim
# and when training starts, the moments before a training run's own handler is in place.
stop_heard = threading.Event()


@worker_init.connect
def wait_for_the_database(**_):
    """A worker started before its database was up (a GPU machine booting before the database's host), or
    beside a database not yet migrated for its code, took training messages and failed each one; it now
    waits before it consumes any, saying why every time the reason changes (`wait_for_schema` in the
    compose file does the same for its containers)."""
    from django.db import connection

    from webapp.core import health

    try:
        health.wait_until_ready(lambda error: logger.warning("waiting for the database: %s", error))
    finally:
        connection.close()  # the worker's own process keeps no connection; pool children open theirs


@worker_process_init.connect
def pool_children_ignore_sigterm(**_):
    """A pool child killed by SIGTERM while it waits for a task dies holding the pool's queue lock, and the
    worker's warm shutdown then waits for that lock forever. `./echolab run` and the tests stop a worker by
    signalling its whole process group, so children ignore SIGTERM: the worker stops idle children itself,
    and a task that trains notes SIGTERM from its start (worker/training.py, train_run)."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


@worker_shutting_down.connect
def pass_the_stop_on_to_training(how, **_):
    """A supervisor that signals only the worker's own process (`docker compose stop`, Kubernetes, systemd
    with KillMode=mixed) left the training child at work: the warm shutdown waited for the whole run and was
    killed at the end of its grace period, mid-step. The children hear it from here: an idle one ignores
    it (above), one with a run leaves it queued or checkpoints it at its step boundary."""
    if how != "Warm":
        return
    for child in active_children():
        with contextlib.suppress(ProcessLookupError):  # it ended meanwhile
            os.kill(child.pid, signal.SIGTERM)


@worker_ready.connect
def recover_runs_orphaned_on_this_host(**_):
    """A worker killed mid-run (SIGKILL, out of memory) left its run "running"; the next worker to start on
    the same machine sees its process is gone and queues it again at once (worker/sweeper.py)."""
    import socket

    from django.db import connection

    from worker.sweeper import recover_orphans

    try:
        counts = recover_orphans(socket.gethostname())
    finally:
        connection.close()  # the worker's own process keeps no connection; pool children open theirs
    if any(counts.values()):
        logger.info("runs orphaned on this host: %s", counts)
