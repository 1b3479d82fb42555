"""Celery tasks: the glue between the trainer, the detector and the database."""

import socket

from worker.celery import app


@app.task(name="worker.tasks.ping")
def ping(nonce: str, queue: str = "default") -> None:
    from webapp.core.models import WorkerPing

    WorkerPing.objects.get_or_create(nonce=nonce, defaults={"hostname": socket.gethostname(), "queue": queue})
