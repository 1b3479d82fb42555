import pytest
from django.core.management import CommandError, call_command
from django.db.migrations.recorder import MigrationRecorder
from django.test import override_settings

from webapp.core import health


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
    monkeypatch.setattr(health, "_schema_current", False)
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
    assert health._schema_current  # found current once: not asked again by this process


def test_wait_for_schema_returns_once_migrated_and_fails_naming_what_is_missing(db, monkeypatch):
    monkeypatch.setattr(health, "_schema_current", False)
    last = MigrationRecorder.Migration.objects.filter(app="accounts").order_by("-name").first()
    last.delete()
    with pytest.raises(
        CommandError, match=f"not ready after 0 s: 1 migration \\(accounts.{last.name}\\) not"
    ):
        call_command("wait_for_schema", "--timeout", "0")
    MigrationRecorder.Migration.objects.create(app="accounts", name=last.name)
    call_command("wait_for_schema", "--timeout", "0")  # returns
