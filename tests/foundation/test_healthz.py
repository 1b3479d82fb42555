from django.test import override_settings


def test_healthz_ok_when_database_and_broker_answer(client, db):
    response = client.get("/healthz")
    assert response.status_code == 200
    body = response.json()
    assert body == {"database": {"ok": True}, "broker": {"ok": True}, "status": "ok"}


@override_settings(CELERY_BROKER_URL="redis://127.0.0.1:1/0")
def test_healthz_503_when_broker_unreachable(client, db):
    response = client.get("/healthz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "unavailable"
    assert body["database"] == {"ok": True}
    assert body["broker"]["ok"] is False and body["broker"]["error"]
