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
    """The mlflow module, logging as alice, with no experiment chosen; runs left open are ended."""
    import mlflow
    from mlflow.tracking import fluent

    # set_experiment's choice (a module global and MLFLOW_EXPERIMENT_ID) would outlive the test.
    monkeypatch.setattr(fluent, "_active_experiment_id", None)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_ID", "")
    monkeypatch.delenv("MLFLOW_EXPERIMENT_ID")
    point_mlflow_at(monkeypatch, live_server.url, ApiToken.issue(alice, "mlflow")[1])
    yield mlflow
    while mlflow.active_run():
        mlflow.end_run()
    mlflow.set_tracking_uri(None)
