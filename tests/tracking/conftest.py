"""The real `mlflow` client pointed at the live test server with an EchoLab API token."""

import pytest

from webapp.accounts.models import ApiToken


def point_mlflow_at(monkeypatch, url: str, token: str) -> None:
    import mlflow

    monkeypatch.setenv("MLFLOW_TRACKING_URI", url)
    monkeypatch.setenv("MLFLOW_TRACKING_TOKEN", token)
    # A refused call is an answer, not a network fault: no minutes of retries.
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "60")
    mlflow.set_tracking_uri(url)


@pytest.fixture
def mlflow_alice(live_server, alice, monkeypatch, purge_broker):
    """The mlflow module, logging as alice; runs left open are ended."""
    import mlflow

    point_mlflow_at(monkeypatch, live_server.url, ApiToken.issue(alice, "mlflow")[1])
    yield mlflow
    while mlflow.active_run():
        mlflow.end_run()
    mlflow.set_tracking_uri(None)
