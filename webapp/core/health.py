"""Reachability checks for /healthz and the launcher."""

from django.conf import settings
from django.db import connection
from kombu import Connection


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
