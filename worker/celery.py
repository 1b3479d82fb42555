"""The Celery app. Two queues: `gpu` (training, one run at a time per worker) and `default`
(emails, housekeeping). Settings come from Django's settings, CELERY_* names."""

import os

from celery import Celery
from kombu import Queue

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

app = Celery("echolab", include=["worker.tasks"])
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.task_queues = (Queue("default"), Queue("gpu"))
