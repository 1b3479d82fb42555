"""README's recipe for streaming from a script with no mlflow client: MLflow's REST calls make the
experiment and the run, EchoLab's JSON ingest takes its points, runs/update ends it."""

import json

from webapp.accounts.models import ApiToken
from webapp.experiments.models import Run


def test_the_readmes_plain_http_recipe_streams_a_run_and_ends_it(client, alice):
    token = ApiToken.issue(alice, "script")[1]

    def post(path, body):
        response = client.post(
            path, json.dumps(body), content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}"
        )
        assert response.status_code == 200, response.content
        return response.json()

    experiment_id = post("/api/2.0/mlflow/experiments/create", {"name": "my-sweep"})["experiment_id"]
    created = post("/api/2.0/mlflow/runs/create", {"experiment_id": experiment_id, "run_name": "seed 1"})
    run_uuid = created["run"]["info"]["run_id"]
    tags = {tag["key"]: tag["value"] for tag in created["run"]["data"]["tags"]}
    run_id = tags["echolab.run_id"]
    answer = post(
        f"/api/runs/{run_id}/metrics",
        [{"step": step, "key": "train/success", "value": 0.1 * step} for step in range(3)],
    )
    assert answer["written"] == 3
    post("/api/2.0/mlflow/runs/update", {"run_id": run_uuid, "status": "FINISHED"})
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.label, run.experiment.name) == (Run.Status.COMPLETED, "seed 1", "my-sweep")
    assert run.step == 2  # its last step logged
