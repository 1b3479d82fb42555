from datetime import timedelta

import pytest
from django.core.management import CommandError, call_command
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings
from django.utils import timezone

from webapp.core import health
from webapp.core.models import WorkerPing
from worker.tasks import sweep_runs


def test_healthz_ok_when_database_and_broker_answer(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body == {"database": {"ok": True}, "schema": {"ok": True}, "broker": {"ok": True}, "status": "ok"}


@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_healthz_503_when_broker_unreachable(client, db):
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["database"] == {"ok": True}
    assert body["broker"]["ok"] is False and body["broker"]["error"]


def test_healthz_503_until_an_upgrades_migrations_are_applied_and_for_code_older_than_the_schema(
    client, db, monkeypatch
):
    # New code on an old database answered "ok" while its pages failed on missing columns (an operator's).
    monkeypatch.setattr(health, "_schema_current", None)
    applied = MigrationRecorder.Migration.objects
    last = applied.filter(app="accounts").order_by("-name").first()
    last.delete()
    response = client.get("/healthz")
    assert response.status_code == 503
    assert response.json()["schema"] == {
        "ok": False,
        "error": f"1 migration (accounts.{last.name}) not applied: run `python manage.py migrate`",
    }
    applied.create(app="accounts", name=last.name)
    applied.create(app="alerts", name="9999_from_a_newer_version")
    error = client.get("/healthz").json()["schema"]["error"]
    assert error.startswith("the database has 1 migration (alerts.9999_from_a_newer_version) that this code")
    applied.filter(name="9999_from_a_newer_version").delete()
    assert client.get("/healthz").status_code == 200
    # found current: not asked again for a minute, then asked again (an upgrade may migrate meanwhile)
    applied.create(app="alerts", name="9999_from_a_newer_version")
    assert client.get("/healthz").status_code == 200
    monkeypatch.setattr(health, "_schema_current", health._schema_current - health.SCHEMA_CHECKED_FOR)
    assert client.get("/healthz").status_code == 503


def test_wait_for_schema_returns_once_migrated_and_fails_naming_what_is_missing(db, monkeypatch):
    monkeypatch.setattr(health, "_schema_current", None)
    last = MigrationRecorder.Migration.objects.filter(app="accounts").order_by("-name").first()
    last.delete()
    with pytest.raises(
        CommandError, match=f"not ready after 0 s: 1 migration \\(accounts.{last.name}\\) not"
    ):
        call_command("wait_for_schema", "--timeout", "0")
    MigrationRecorder.Migration.objects.create(app="accounts", name=last.name)
    call_command("wait_for_schema", "--timeout", "0")  # returns


def test_healthz_with_workers_says_when_the_sweeper_stopped(client, db):
    # An operator's: with beat down (or no default worker) lost runs were never requeued, and /healthz said ok.
    WorkerPing.objects.filter(nonce=WorkerPing.SWEEPER).delete()
    answer = client.get("/healthz", {"workers": "1"}).json()
    assert answer["sweeper"]["error"] == "the sweeper has never run: start beat and a default worker"
    assert answer["status"] == "unavailable" and client.get("/healthz").status_code == 200  # asked for only
    sweep_runs()  # the beat task, run here
    assert client.get("/healthz", {"workers": "1"}).json()["sweeper"] == {"ok": True}
    WorkerPing.objects.filter(nonce=WorkerPing.SWEEPER).update(
        answered_at=timezone.now() - timedelta(minutes=10)
    )
    error = client.get("/healthz", {"workers": "1"}).json()["sweeper"]["error"]
    assert (
        error.startswith("the sweeper last ran 600 s ago on ")
        and "are beat and a default worker running?" in error
    )


@pytest.mark.slow
def test_healthz_with_workers_says_whether_a_worker_consumes_the_gpu_queue(client, start_worker):
    # With no gpu worker (or one started on a misspelt queue) queued runs waited and /healthz said ok.
    start_worker("gpus", name="misspelt")
    error = client.get("/healthz", {"workers": "1"}).json()["gpu_workers"]["error"]
    assert error == "no worker consumes the gpu queue: queued runs wait"
    start_worker("gpu", name="listening")
    assert client.get("/healthz", {"workers": "1"}).json()["gpu_workers"] == {"ok": True}


def test_healthz_with_workers_on_the_embedded_broker_says_it_cannot_ask(client, db, settings):
    """./echolab run's filesystem broker has no broadcast: its silence is no "no worker" (a tester saw 503
    'no worker consumes the gpu queue' while a run was training)."""
    settings.CELERY_BROKER_URL = "filesystem://"
    error = client.get("/healthz", {"workers": "1"}).json()["gpu_workers"]["error"]
    assert error == "the workers could not be asked (the broker is unreachable or cannot broadcast)"
