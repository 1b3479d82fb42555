"""Reachability checks for /healthz and the launcher."""

from django.conf import settings
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from kombu import Connection

# Set once this process has found the database's schema to be its code's: that stays true until the code
# changes, which is a new process. /healthz then pays for the migration graph once, not on every probe.
_schema_current = False


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


def schema_error() -> str | None:
    """The database's schema is not this code's: migrations not applied yet (an upgrade's `migrate` has not
    run: pages and the API would fail on missing columns), or applied migrations this code does not have
    (older code beside a migrated database, as in the middle of an upgrade)."""
    global _schema_current
    if _schema_current:
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
        return f"the database has {_listed(unknown)} that this code lacks: it is older than the schema; upgrade it"
    _schema_current = True
    return None


def _listed(migrations: list[str]) -> str:
    shown = ", ".join(migrations[:4]) + (f" and {len(migrations) - 4} more" if len(migrations) > 4 else "")
    return f"{len(migrations)} migration{'s' if len(migrations) != 1 else ''} ({shown})"
