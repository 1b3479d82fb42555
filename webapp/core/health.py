"""Reachability checks for /healthz and the launcher."""

import time

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone
from kombu import Connection

from webapp.core.models import WorkerPing
from worker import queues

# When this process last found the database's schema to be its code's (time.monotonic()): /healthz pays for
# the migration graph once a minute, not on every probe, and still sees an upgrade migrate the database
# under it (old code beside a migrated database) within that minute.
_schema_current = None
SCHEMA_CHECKED_FOR = 60


def database_error() -> str | None:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except Exception as error:  # any driver error means "not reachable"
        return f"{type(error).__name__}: {error}".strip()
    return None


def broker_error(timeout: float = 2.0) -> str | None:
    try:
        with Connection(
            settings.CELERY_BROKER_URL,
            transport_options=settings.CELERY_BROKER_TRANSPORT_OPTIONS,
            connect_timeout=timeout,
        ) as broker:
            broker.ensure_connection(max_retries=1, timeout=timeout)
    except Exception as error:
        return f"{type(error).__name__}: {error}".strip()
    return None


def wait_until_ready(say, timeout: float | None = None, pause: float = 2.0) -> str | None:
    """Wait until the database is reachable and its schema is this code's; `say(error)` on each new reason to
    wait. Returns None, or the last reason once `timeout` seconds have passed (None: no limit)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    said = None
    while True:
        error = database_error()
        if error:
            connection.close()  # a new connection next round: the database may be starting
        error = error or schema_error()
        if error is None or (deadline is not None and time.monotonic() >= deadline):
            return error
        if error != said:
            say(error)
            said = error
        time.sleep(pause)


def schema_error() -> str | None:
    """The database's schema is not this code's: migrations not applied yet (an upgrade's `migrate` has not
    run: pages and the API would fail on missing columns), or applied migrations this code does not have
    (older code beside a migrated database, as in the middle of an upgrade)."""
    global _schema_current
    if _schema_current is not None and time.monotonic() - _schema_current < SCHEMA_CHECKED_FOR:
        return None
    try:
        executor = MigrationExecutor(connection)
        pending = [
            f"{m.app_label}.{m.name}" for m, _ in executor.migration_plan(executor.loader.graph.leaf_nodes())
        ]
        ours = {app for app, _ in executor.loader.disk_migrations}
        unknown = sorted(
            f"{app}.{name}"
            for app, name in executor.loader.applied_migrations
            if app in ours and (app, name) not in executor.loader.disk_migrations
        )
    except Exception as error:
        return f"{type(error).__name__}: {error}".strip()
    if pending:
        return f"{_listed(pending)} not applied: run `python manage.py migrate`"
    if unknown:
        return (
            f"the database has {_listed(unknown)} that this code lacks: it is older than the schema; upgrade it "
            "(or, if those migrations were removed on purpose, `python manage.py migrate --prune`)"
        )
    _schema_current = time.monotonic()
    return None


def _listed(migrations: list[str]) -> str:
    shown = ", ".join(migrations[:4]) + (f" and {len(migrations) - 4} more" if len(migrations) > 4 else "")
    return f"{len(migrations)} migration{'s' if len(migrations) != 1 else ''} ({shown})"


def sweeper_error() -> str | None:
    """Whether the sweeper ran lately: without beat or a default worker, lost runs are never requeued and
    alert emails never retried, and nothing else says so."""
    every = settings.CELERY_BEAT_SCHEDULE["sweep-runs"]["schedule"].total_seconds()
    ran = WorkerPing.objects.filter(nonce=WorkerPing.SWEEPER).first()
    if ran is None:
        return "the sweeper has never run: start beat and a default worker"
    ago = (timezone.now() - ran.answered_at).total_seconds()
    if ago > max(3 * every, 120):
        return (
            f"the sweeper last ran {ago:.0f} s ago on {ran.hostname} (it runs every {every:g} s): "
            "are beat and a default worker running?"
        )
    return None


def gpu_workers_error() -> str | None:
    """Whether any worker consumes the gpu queue: without one, queued runs wait for ever."""
    listening = queues.listeners(queues.GPU)
    if listening is None:
        return "the workers could not be asked (the broker is unreachable or cannot broadcast)"
    return None if listening else f"no worker consumes the {queues.GPU} queue: queued runs wait"
