from django.urls import path

from webapp.runs import api, views

urlpatterns = [
    path("runs/", views.run_list, name="run_list"),
    path("runs/export.csv", views.runs_export, name="runs_export"),
    path("runs/<id:pk>/", views.run_detail, name="run_detail"),
    path("runs/<id:pk>/stop", views.run_stop, name="run_stop"),
    path("runs/<id:pk>/resume", views.run_resume, name="run_resume"),
    path("runs/<id:pk>/trajectories", views.run_trajectories, name="run_trajectories"),
    path("runs/<id:pk>/edit", views.run_edit, name="run_edit"),
    path("runs/archive-selected", views.runs_archive_selected, name="runs_archive_selected"),
    path("runs/delete-selected", views.runs_delete_selected, name="runs_delete_selected"),
    path("runs/<id:pk>/archive", views.run_archive, name="run_archive"),
    path("runs/<id:pk>/restore", views.run_restore, name="run_restore"),
    path("runs/<id:pk>/delete", views.run_delete, name="run_delete"),
    path("api/runs", api.runs, name="api_runs"),
    path("api/runs/<id:pk>", api.run, name="api_run"),
    path("api/runs/<id:pk>/stop", api.run_stop, name="api_run_stop"),
    path("api/runs/<id:pk>/resume", api.run_resume, name="api_run_resume"),
    path("api/runs/<id:pk>/detector-inputs", api.detector_inputs, name="api_run_detector_inputs"),
]
