from django.urls import path

from webapp.metrics import api, views

urlpatterns = [
    path("runs/<id:pk>/", views.run_detail, name="run_detail"),
    path("runs/<id:pk>/stop", views.run_stop, name="run_stop"),
    path("runs/<id:pk>/trajectories", views.run_trajectories, name="run_trajectories"),
    path("api/runs/<id:pk>/metrics", api.metrics, name="api_run_metrics"),
    path("api/runs/<id:pk>/export", api.export_metrics, name="api_run_export"),
    path("api/runs/<id:pk>/events", api.events, name="api_run_events"),
    path("api/runs/<id:pk>/samples", api.samples, name="api_run_samples"),
]
