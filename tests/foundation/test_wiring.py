"""A task sent through the real Redis broker is executed by a real worker process and lands in Postgres."""

import uuid

from django.conf import settings

from tests.helpers import wait_for
from webapp.core.models import WorkerPing
from worker.tasks import ping


def test_task_through_redis_runs_in_worker_process_and_writes_postgres(start_worker, purge_broker):
    assert settings.CELERY_BROKER_URL.startswith("redis://"), "the suite runs against real Redis"
    assert settings.DATABASES["default"]["ENGINE"].endswith("postgresql"), "the suite runs against Postgres"
    worker = start_worker("default", name="wiring")
    nonce = uuid.uuid4().hex

    ping.apply_async(args=[nonce], queue="default")

    row = wait_for(lambda: WorkerPing.objects.filter(nonce=nonce).first(), timeout=60, message="the ping row")
    assert row.queue == "default"
    assert "Task worker.tasks.ping[" in worker.output()
