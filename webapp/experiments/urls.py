from django.urls import path
from django.views.generic import RedirectView

from webapp.experiments import api, views

urlpatterns = [
    path("", views.experiment_list, name="experiment_list"),
    # The list is the home page; its own address, as every experiment's lies under it, leads there.
    path("experiments/", RedirectView.as_view(pattern_name="experiment_list", query_string=True)),
    path("experiments/new/", views.experiment_new, name="experiment_new"),
    path("experiments/estimate", views.experiment_estimate, name="experiment_estimate"),
    path("experiments/import/", views.experiment_import, name="experiment_import"),
    path("experiments/<id:pk>/", views.experiment_detail, name="experiment_detail"),
    path("experiments/<id:pk>/rerun/", views.experiment_rerun, name="experiment_rerun"),
    path("experiments/<id:pk>/stop/", views.experiment_stop, name="experiment_stop"),
    path("experiments/<id:pk>/resume/", views.experiment_resume, name="experiment_resume"),
    path("experiments/<id:pk>/delete/", views.experiment_delete, name="experiment_delete"),
    path("experiments/<id:pk>/alerts/", views.experiment_alerts, name="experiment_alerts"),
    path("experiments/<id:pk>/alerts/test/", views.experiment_alert_test, name="experiment_alert_test"),
    path("experiments/<id:pk>/export.yaml", views.experiment_export, name="experiment_export"),
    path("runs/<id:pk>/rerun/", views.run_rerun, name="run_rerun"),
    path("api/experiments", api.experiments, name="api_experiments"),
    path("api/experiments/<id:pk>", api.experiment, name="api_experiment"),
]
