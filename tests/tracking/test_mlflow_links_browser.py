"""The links the mlflow client prints (`{tracking URI}/#/experiments/<id>/runs/<run id>`) open the run's
page, or the experiment's; a run id that is not the user's is a 404."""

import pytest
from django.utils import timezone

from webapp.tracking.models import ExternalExperiment, ExternalRun


@pytest.fixture
def mlflow_run(alice):
    return ExternalRun.start(ExternalExperiment.create(alice, "trl"), "grpo", {}, "alice", timezone.now())


@pytest.mark.browser
@pytest.mark.slow
def test_the_printed_links_open_the_run_and_the_experiment(page):
    run = ExternalRun.start(ExternalExperiment.create(page.user, "trl"), "grpo", {}, "u", timezone.now())
    experiment_id = run.run.experiment_id
    page.goto(f"{page.base}/#/experiments/{experiment_id}/runs/{run.run_uuid}")
    page.wait_for_url(f"**/runs/{run.pk}/")
    assert page.get_by_role("heading", level=1).inner_text().startswith("grpo")
    page.goto(f"{page.base}/#/experiments/{experiment_id}")
    page.wait_for_url(f"{page.base}/experiments/{experiment_id}/")

    # Pasted into a tab already on the home page, only the fragment changes: nothing loads by itself
    page.goto(f"{page.base}/")
    page.goto(f"{page.base}/#/experiments/{experiment_id}/runs/{run.run_uuid}")
    page.wait_for_url(f"**/runs/{run.pk}/")


def test_the_run_id_page_is_the_owners_only(client, alice, bob, mlflow_run):
    url = f"/mlflow/runs/{mlflow_run.run_uuid}/"
    client.force_login(alice)
    response = client.get(url)
    assert response.status_code == 302 and response["Location"] == mlflow_run.run.get_absolute_url()
    assert client.get("/mlflow/runs/" + "0" * 32 + "/").status_code == 404
    client.force_login(bob)
    assert client.get(url).status_code == 404


def test_the_experiment_id_page_is_the_owners_only_and_0_is_their_default(client, alice, bob, mlflow_run):
    experiment = mlflow_run.run.experiment
    client.force_login(alice)
    response = client.get(f"/mlflow/experiments/{experiment.pk}/")
    assert response.status_code == 302 and response["Location"] == experiment.get_absolute_url()
    assert client.get("/mlflow/experiments/0/").status_code == 404  # no Default experiment made yet
    default = ExternalExperiment.get_for(alice, "0")
    assert client.get("/mlflow/experiments/0/")["Location"] == default.experiment.get_absolute_url()
    client.force_login(bob)
    assert client.get(f"/mlflow/experiments/{experiment.pk}/").status_code == 404
