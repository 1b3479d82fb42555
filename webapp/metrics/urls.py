from django.urls import path

from webapp.metrics import api

urlpatterns = [
    path("api/runs/<id:pk>/metrics", api.metrics, name="api_run_metrics"),
    path("api/runs/<id:pk>/export", api.export_metrics, name="api_run_export"),
    path("api/runs/<id:pk>/events", api.events, name="api_run_events"),
    path("api/runs/<id:pk>/samples", api.samples, name="api_run_samples"),
    path("api/runs/<id:pk>/reward-std-hist", api.reward_std_hist, name="api_run_reward_std_hist"),
]
