"""Deleting a run with its data: the Delete button on its page (POST /runs/<id>/delete) and DELETE
/api/runs/<id>. All or nothing, owner only, refused while the run is queued or running."""

import logging
from datetime import UTC, datetime

import pytest
from django.contrib.messages import get_messages
from django.db import connection
from django.test.utils import CaptureQueriesContext

from tests.factories import make_run, rows_of, run_with_data
from webapp.alerts.models import Notification
from webapp.experiments.models import Run
from webapp.tracking.models import ExternalExperiment, ExternalRun

GONE = {
    "runs": 0,
    "points": 0,
    "rollups": 0,
    "step_records": 0,
    "samples": 0,
    "events": 0,
    "notifications": 0,
    "notification_links": 0,
}


@pytest.fixture
def checkpoint_root(settings, tmp_path):
    settings.CHECKPOINT_ROOT = tmp_path / "checkpoints"
    return settings.CHECKPOINT_ROOT


def with_checkpoints(run: Run) -> Run:
    """A checkpoint folder as the trainer leaves one: CHECKPOINT_ROOT/<run id>/step_N/..."""
    (run.checkpoint_dir / "step_3").mkdir(parents=True)
    (run.checkpoint_dir / "step_3" / "adapter.bin").write_bytes(b"weights")
    return run


def messages_of(response) -> list[str]:
    return [str(message) for message in get_messages(response.wsgi_request)]


def test_the_run_page_has_a_delete_button_whose_confirmation_says_what_is_lost(
    alice_client, alice, checkpoint_root
):
    run = with_checkpoints(run_with_data(alice))
    Notification.objects.filter(event__run=run).update(
        status=Notification.Status.SENT, sent_at=datetime.now(UTC)
    )
    html = alice_client.get(run.get_absolute_url()).content.decode()
    assert f'action="/runs/{run.pk}/delete"' in html
    assert (
        f'data-confirm="Delete {run.display_name} for good? Its metrics, samples, detector events, alert '
        'history and checkpoints on disk are deleted; this cannot be undone."'
    ) in html


def test_the_confirmation_says_an_alert_email_still_waiting_will_not_be_sent(alice_client, alice):
    run = run_with_data(alice)  # its email is pending: gathering alerts, or waiting to be tried again
    html = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'this cannot be undone. Its alert email not sent yet will not be sent."' in html


def test_a_run_without_checkpoints_is_not_said_to_lose_any(alice_client, alice, checkpoint_root):
    html = alice_client.get(run_with_data(alice).get_absolute_url()).content.decode()
    assert "detector events and alert history are deleted" in html and "checkpoints" not in html


def test_delete_on_the_page_removes_the_run_its_data_and_checkpoints_then_shows_its_experiment(
    alice_client, alice, checkpoint_root, django_capture_on_commit_callbacks
):
    run = with_checkpoints(run_with_data(alice, label="seed=1"))
    kept = with_checkpoints(run_with_data(alice, experiment=run.experiment, label="seed=2"))
    kept_rows = rows_of(kept)
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(f"/runs/{run.pk}/delete")
    assert response.status_code == 302 and response["Location"] == run.experiment.get_absolute_url()
    assert messages_of(response) == ["Deleted seed=1 with its metrics, samples and detector events."]
    assert rows_of(run) == GONE
    assert not run.checkpoint_dir.exists()
    assert rows_of(kept) == kept_rows and kept_rows["points"] == 300 and kept_rows["notifications"] == 2
    assert kept.checkpoint_dir.is_dir()
    runs_table = alice_client.get(run.experiment.get_absolute_url() + "?part=runs").content.decode()
    assert "seed=2" in runs_table and "seed=1" not in runs_table


def test_delete_through_the_api_is_a_204_then_the_run_is_a_404(
    client, alice, alice_token, django_capture_on_commit_callbacks
):
    run = run_with_data(alice)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {alice_token}"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete(f"/api/runs/{run.pk}", **auth)
    assert response.status_code == 204 and response.content == b""
    assert rows_of(run) == GONE
    assert client.get(f"/api/runs/{run.pk}", **auth).status_code == 404
    assert client.delete(f"/api/runs/{run.pk}", **auth).json() == {"error": "run not found"}


def test_another_users_run_is_a_404_and_stays(client, bob_client, alice, bob_token):
    run = run_with_data(alice)
    before = rows_of(run)
    assert bob_client.post(f"/runs/{run.pk}/delete").status_code == 404
    response = client.delete(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {bob_token}")
    assert response.status_code == 404 and response.json() == {"error": "run not found"}
    assert rows_of(run) == before


def mlflow_run(owner) -> Run:
    """A run an MLflow client is logging (started, not ended)."""
    experiment = ExternalExperiment.create(owner, "trl-sweep")
    return ExternalRun.start(experiment, "grpo", {}, "alice", datetime.now(UTC)).run


TRAINING = {
    "queued": (
        lambda owner: run_with_data(owner, status=Run.Status.QUEUED),
        "is queued: stop it first (a queued run stops at once), then delete it",
    ),
    "running": (
        lambda owner: run_with_data(owner, status=Run.Status.RUNNING),
        "is running: stop it first, then delete it once it has stopped",
    ),
    "stopping": (
        lambda owner: run_with_data(owner, status=Run.Status.RUNNING, stop_requested=True),
        "is stopping: delete it once it has stopped, at its next step boundary",
    ),
    "mlflow": (
        mlflow_run,
        "is running: it is logged by an MLflow client, which EchoLab cannot stop; end it in its script "
        "(mlflow.end_run()), or wait until it is marked lost after 900 s without a call, then delete it",
    ),
}


@pytest.mark.parametrize("state", TRAINING)
def test_a_queued_or_running_run_is_refused_with_what_to_do_and_nothing_is_deleted(
    client, alice_client, alice, alice_token, settings, state
):
    settings.MLFLOW_LOST_AFTER = 900
    make, problem = TRAINING[state]
    run = make(alice)
    before = rows_of(run)
    response = client.delete(f"/api/runs/{run.pk}", HTTP_AUTHORIZATION=f"Bearer {alice_token}")
    assert response.status_code == 409
    assert response.json() == {"error": f"run {run.pk} {problem}"}
    response = alice_client.post(f"/runs/{run.pk}/delete")
    assert response.status_code == 302 and response["Location"] == run.get_absolute_url()
    assert messages_of(response) == [f"Not deleted: run {run.pk} {problem}."]
    assert rows_of(run) == before
    assert ExternalRun.objects.filter(run=run).exists() == (state == "mlflow")


def test_the_button_of_a_run_still_training_is_disabled_saying_why_in_words(alice_client, alice):
    """In words beside it, not only in a tooltip a phone never shows."""
    run = make_run(alice, status=Run.Status.RUNNING)
    html = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'class="button button-danger" disabled aria-describedby="delete-refusal">Delete</button>' in html
    assert (
        f'id="delete-refusal">Delete is off: run {run.pk} is running: stop it first, then delete it once it has '
        "stopped.</p>"
    ) in html
    Run.objects.filter(pk=run.pk).update(status=Run.Status.STOPPED)
    html = alice_client.get(run.get_absolute_url()).content.decode()
    assert 'class="button button-danger">Delete</button>' in html and "delete-refusal" not in html


def test_an_ended_mlflow_run_is_deleted_with_its_mlflow_record(alice_client, alice):
    run = mlflow_run(alice)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)
    assert alice_client.post(f"/runs/{run.pk}/delete").status_code == 302
    assert not Run.objects.filter(pk=run.pk).exists() and not ExternalRun.objects.filter(pk=run.pk).exists()


def test_the_big_tables_are_deleted_in_the_database_never_read(alice, checkpoint_root):
    """One DELETE each: a run's millions of points must not be loaded into Python to be deleted."""
    run = run_with_data(alice)
    with CaptureQueriesContext(connection) as queries:
        run.delete_with_data()
    big = ("metrics_metricpoint", "metrics_metricrollup", "metrics_sample", "metrics_steprecord")
    reads = [q["sql"] for q in queries if q["sql"].startswith("SELECT") and any(t in q["sql"] for t in big)]
    assert reads == []
    assert rows_of(run) == GONE


def test_checkpoints_that_cannot_be_removed_are_logged_and_the_run_is_deleted(
    alice_client, alice, checkpoint_root, django_capture_on_commit_callbacks, caplog
):
    run = run_with_data(alice)
    checkpoint_root.mkdir()
    run.checkpoint_dir.write_text("not a folder")  # what rmtree refuses, as it would a read-only disk
    with caplog.at_level(logging.ERROR), django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(f"/runs/{run.pk}/delete")
    assert response.status_code == 302
    assert rows_of(run) == GONE
    assert f"checkpoints of deleted run {run.pk} not removed: [Errno 20] Not a directory" in caplog.text
