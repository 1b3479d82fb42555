"""A request that fails on the server: a busy database is a 503 with Retry-After (JSON under /api/, the
MLflow shape under its endpoint, text on a page), never Django's HTML 500 page under /api/."""

import json

import pytest
from django.db import connection
from django.test import RequestFactory

from tests.factories import make_run
from tests.helpers import other_connection
from webapp.accounts.models import ApiToken
from webapp.core.server_errors import server_error
from webapp.experiments.models import Run


@pytest.fixture
def locked_run(transactional_db, alice):
    """A running run whose row another connection holds locked, and this connection's lock wait cut to
    0.2 s: what a request meets while a long transaction (an import, on SQLite the whole database) runs."""
    if connection.vendor != "postgresql":
        pytest.skip("row locks with a lock timeout: Postgres")
    run = make_run(alice, status=Run.Status.RUNNING)
    holder = other_connection(autocommit=False)
    holder.execute("SELECT 1 FROM experiments_run WHERE id = %s FOR UPDATE", [run.pk])
    with connection.cursor() as cursor:
        cursor.execute("SET lock_timeout = '200ms'")
    yield run
    holder.rollback()
    holder.close()
    with connection.cursor() as cursor:
        cursor.execute("RESET lock_timeout")


def test_a_busy_database_is_a_503_the_client_can_retry(client, alice, locked_run):
    _, token = ApiToken.issue(alice, "tests")
    response = client.post(
        f"/api/runs/{locked_run.pk}/metrics",
        json.dumps([{"step": 0, "key": "train/success", "value": 0.5}]),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {token}",
    )
    assert response.status_code == 503 and response["Retry-After"] == "5"
    assert response.json() == {
        "error": "the database is busy or unreachable; retry the request",
        "errors": {},
    }

    client.force_login(alice)
    response = client.post(f"/runs/{locked_run.pk}/stop")
    assert response.status_code == 503 and response["Content-Type"].startswith("text/plain")
    assert b"retry the request" in response.content


def test_a_server_error_under_the_api_is_json():
    factory = RequestFactory()
    response = server_error(factory.get("/api/runs"))
    assert response.status_code == 500 and json.loads(response.content)["error"].startswith("internal")
    response = server_error(factory.post("/api/2.0/mlflow/runs/log-batch"))
    assert json.loads(response.content)["error_code"] == "INTERNAL_ERROR"
    assert server_error(factory.get("/runs/")).status_code == 500  # a page: Django's own error page


@pytest.mark.parametrize(
    "url, field",
    [
        ("/api/runs/{run}/metrics?after=abc", "after"),
        ("/api/runs/{run}/samples?step=-1", "step"),
        ("/api/experiments?page=x", "page"),
        ("/api/experiments?page_size=0", "page_size"),
    ],
)
def test_every_400_names_its_field(alice_client, alice, url, field):
    run = make_run(alice)
    response = alice_client.get(url.format(run=run.pk))
    assert response.status_code == 400 and field in response.json()["errors"]
    assert response.json()["error"].startswith(f"{field}: ")


def test_debug_pages_hide_the_brokers_password_as_they_hide_the_databases(settings):
    # An operator's: DEBUG's settings dump showed CELERY_BROKER_URL whole, password and all.
    from django.views.debug import get_default_exception_reporter_filter

    settings.CELERY_BROKER_URL = "redis://:s3cretpw@redis.example.org:6379/0"
    shown = get_default_exception_reporter_filter().get_safe_settings()
    assert "s3cretpw" not in str(shown["CELERY_BROKER_URL"])
    assert shown["DATABASES"]["default"]["PASSWORD"] == "********************"
