from django.urls import path

from webapp.metrics import api, views

urlpatterns = [
    path("runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("runs/<int:pk>/stop", views.run_stop, name="run_stop"),
    path("runs/<int:pk>/trajectories", views.run_trajectories, name="run_trajectories"),
    path("api/runs/<int:pk>/metrics", api.metrics, name="api_run_metrics"),
    path("api/runs/<int:pk>/export", api.export_metrics, name="api_run_export"),
    path("api/runs/<int:pk>/events", api.events, name="api_run_events"),
    path("api/runs/<int:pk>/samples", api.samples, name="api_run_samples"),
]
