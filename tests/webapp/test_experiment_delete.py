"""Deleting an experiment with its runs and all their data: the Delete button on its page (POST
/experiments/<id>/delete/) and DELETE /api/experiments/<id>. All or nothing, owner only, refused while any
of its runs is queued or running."""

from datetime import UTC, datetime

import pytest
from django.contrib.messages import get_messages
from django.utils import timezone

from tests.factories import make_experiment, make_run, rows_of, run_with_data
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Experiment, Run
from webapp.tracking.models import ExternalExperiment, ExternalRun


@pytest.fixture
def experiment(alice, settings, tmp_path):
    """Two finished runs with data and checkpoints, one of them archived."""
    settings.CHECKPOINT_ROOT = tmp_path / "checkpoints"
    experiment = make_experiment(alice, name="Sokoban sweep")
    for label in ("seed=1", "seed=2"):
        run = run_with_data(alice, experiment=experiment, label=label)
        (run.checkpoint_dir / "step_3").mkdir(parents=True)
    experiment.runs.filter(label="seed=2").update(archived_at=datetime.now(UTC))
    return experiment


def gone(experiment, runs) -> bool:
    return not Experiment.objects.filter(pk=experiment.pk).exists() and all(
        not any(rows_of(run).values()) and not run.checkpoint_dir.exists() for run in runs
    )


def test_the_page_has_a_delete_button_whose_confirmation_counts_the_runs(alice_client, experiment):
    html = alice_client.get(experiment.get_absolute_url()).content.decode()
    assert f'action="/experiments/{experiment.pk}/delete/"' in html
    assert (
        'data-confirm="Delete Sokoban sweep and its 2 runs for good? Their metrics, samples, detector events, '
        'alert history and checkpoints on disk are deleted; this cannot be undone."'
    ) in html


def test_delete_on_the_page_removes_it_with_its_runs_and_goes_to_the_list(
    alice_client, alice, experiment, django_capture_on_commit_callbacks
):
    runs = list(experiment.runs.all())
    other = run_with_data(alice)
    other_rows = rows_of(other)
    with django_capture_on_commit_callbacks(execute=True):
        response = alice_client.post(f"/experiments/{experiment.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == "/"
    assert [str(m) for m in get_messages(response.wsgi_request)] == ["Deleted Sokoban sweep and its 2 runs."]
    assert gone(experiment, runs)
    assert rows_of(other) == other_rows and Experiment.objects.filter(pk=other.experiment_id).exists()


def test_delete_through_the_api_is_a_204_then_the_experiment_is_a_404(
    client, alice, experiment, django_capture_on_commit_callbacks
):
    runs = list(experiment.runs.all())
    auth = {"HTTP_AUTHORIZATION": f"Bearer {ApiToken.issue(alice, 'script')[1]}"}
    with django_capture_on_commit_callbacks(execute=True):
        response = client.delete(f"/api/experiments/{experiment.pk}", **auth)
    assert response.status_code == 204 and response.content == b""
    assert gone(experiment, runs)
    assert client.get(f"/api/experiments/{experiment.pk}", **auth).status_code == 404


def test_another_users_experiment_is_a_404_and_stays(client, bob_client, bob, experiment):
    run = experiment.runs.first()
    before = rows_of(run)
    assert bob_client.post(f"/experiments/{experiment.pk}/delete/").status_code == 404
    token = ApiToken.issue(bob, "script")[1]
    response = client.delete(f"/api/experiments/{experiment.pk}", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 404 and response.json() == {"error": "experiment not found"}
    assert rows_of(run) == before


def test_a_run_still_training_refuses_the_whole_delete_and_nothing_goes(
    client, alice_client, alice, experiment
):
    finished = experiment.runs.first()
    finished_rows = rows_of(finished)
    training = make_run(alice, experiment=experiment, label="seed=3", status=Run.Status.RUNNING)
    queued = make_run(alice, experiment=experiment, label="seed=4", status=Run.Status.QUEUED)
    problem = (
        f"experiment {experiment.pk} has 2 runs not finished (run {training.pk} running, run {queued.pk} "
        "queued): stop them first (a queued run stops at once), then delete it once they have stopped"
    )
    page = alice_client.get(experiment.get_absolute_url()).content.decode()
    assert (
        'data-off-while="#delete-refusal-now" aria-describedby="delete-refusal" disabled>Delete</button>'
        in page
    )
    assert f'data-copy-of="#delete-refusal-now">Delete is off: {problem}.</p>' in page  # beside the button
    assert f'<span hidden id="delete-refusal-now">Delete is off: {problem}.</span>' in page  # the live part's
    token = ApiToken.issue(alice, "script")[1]
    response = client.delete(f"/api/experiments/{experiment.pk}", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 409 and response.json() == {"error": problem}
    response = alice_client.post(f"/experiments/{experiment.pk}/delete/")
    assert response.status_code == 302 and response["Location"] == experiment.get_absolute_url()
    assert [str(m) for m in get_messages(response.wsgi_request)] == [f"Not deleted: {problem}."]
    assert rows_of(finished) == finished_rows and Run.objects.filter(pk=training.pk).exists()
    assert finished.checkpoint_dir.is_dir()


def test_many_runs_in_the_way_are_counted_not_each_named(alice_client, alice):
    experiment = make_experiment(alice, name="grid")
    make_run(alice, experiment=experiment, label="seed=1", status=Run.Status.RUNNING)
    for seed in range(2, 10):
        make_run(alice, experiment=experiment, label=f"seed={seed}")
    problem = (
        f"experiment {experiment.pk} has 9 runs not finished (1 running, 8 queued): stop them first (a "
        "queued run stops at once), then delete it once they have stopped"
    )
    assert experiment.delete_refusal == problem
    response = alice_client.post(f"/experiments/{experiment.pk}/delete/", follow=True)
    assert f"Not deleted: {problem}." in response.content.decode()
    assert Run.objects.filter(experiment=experiment).count() == 9
    for run in experiment.runs.all():
        run.request_stop()  # the queued ones stop at once, the running one at its next step
    Run.objects.filter(experiment=experiment, status=Run.Status.STOPPED).update(status=Run.Status.RUNNING)
    assert experiment.delete_refusal == (
        f"experiment {experiment.pk} has 9 runs not finished (9 stopping): delete it once they have stopped"
    )


def test_an_mlflow_experiment_goes_with_its_name_which_a_script_may_then_use_again(alice_client, alice):
    external = ExternalExperiment.create(alice, "trl-sweep")
    run = ExternalRun.start(external, "grpo", {}, "alice", datetime.now(UTC)).run
    Run.objects.filter(pk=run.pk).update(status=Run.Status.COMPLETED)  # its script called end_run()
    assert alice_client.post(f"/experiments/{external.experiment_id}/delete/").status_code == 302
    assert not ExternalExperiment.objects.exists() and not ExternalRun.objects.exists()
    assert ExternalExperiment.create(alice, "trl-sweep").name == "trl-sweep"


@pytest.mark.parametrize("path", ["/api/runs/{pk}", "/api/experiments/{pk}"])
def test_the_api_document_describes_delete(client, db, path):
    delete = client.get("/api/schema").json()["paths"][path]["delete"]
    assert {"204", "404", "409"} <= set(delete["responses"])
    assert "queued or running" in delete["description"]


def test_an_experiment_without_runs_says_so_instead_of_an_empty_table(alice_client, alice):
    empty = make_experiment(alice, name="emptied", config={"env": {"name": "bandit"}})
    page = alice_client.get(empty.get_absolute_url()).content.decode()
    assert 'id="no-runs">No runs: they were deleted.' in page and '<table class="data runs' not in page
    assert 'data-confirm="Delete emptied (it has no runs) for good? This cannot be undone."' in page
    assert "Config (as planned for a first run)" in page and "Config (first run)" not in page  # none left
    make_run(alice, experiment=empty, archived_at=timezone.now())  # out of sight, still its first run
    assert "Config (first run)" in alice_client.get(empty.get_absolute_url()).content.decode()
