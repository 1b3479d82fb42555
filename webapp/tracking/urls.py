"""MLflow's REST paths, under /api/2.0/mlflow/ and the /ajax-api/2.0/mlflow/ spelling its UI uses. Kept out
of /api/schema (the OpenAPI document describes EchoLab's own API); docs/MLFLOW.md documents them. And the
page of an MLflow run id."""

from django.urls import path, re_path

from webapp.tracking import views

ENDPOINTS = {
    "experiments/create": views.create_experiment,
    "experiments/get": views.get_experiment,
    "experiments/get-by-name": views.get_experiment_by_name,
    "experiments/search": views.search_experiments,
    "experiments/update": views.update_experiment,
    "experiments/set-experiment-tag": views.set_experiment_tag,
    "experiments/delete-experiment-tag": views.delete_experiment_tag,
    "runs/create": views.create_run,
    "runs/get": views.get_run,
    "runs/update": views.update_run,
    "runs/log-metric": views.log_metric,
    "runs/log-parameter": views.log_parameter,
    "runs/log-batch": views.log_batch,
    "runs/log-inputs": views.log_inputs,
    "runs/set-tag": views.set_tag,
    "runs/delete-tag": views.delete_tag,
    "runs/delete": views.delete_run,
    "runs/restore": views.restore_run,
    "runs/search": views.search_runs,
    "metrics/get-history": views.get_metric_history,
    "logged-models/search": views.search_logged_models,
}

urlpatterns = [
    path(f"{prefix}/2.0/mlflow/{endpoint}", view, name=f"mlflow_{endpoint}" if prefix == "api" else None)
    for prefix in ("api", "ajax-api")
    for endpoint, view in ENDPOINTS.items()
] + [
    re_path(r"^(?:api|ajax-api)/2\.0/mlflow-artifacts/artifacts(?:/(?P<path>.+))?$", views.artifacts),
    re_path(r"^(?:api|ajax-api)/[\d.]+/(?P<path>mlflow(?:-artifacts)?/.*)$", views.unsupported),
    # The pages of MLflow ids: where the links the mlflow client prints land (static/js/mlflow_link.js)
    path("mlflow/experiments/<id:experiment_id>/", views.experiment_page, name="mlflow_experiment_page"),
    path("mlflow/runs/<slug:run_uuid>/", views.run_page, name="mlflow_run_page"),
    path("mlflow/runs/<slug:run_uuid>/artifacts/<path:path>", views.run_artifact, name="mlflow_run_artifact"),
]
