from django.urls import path

from webapp.runs import api, views

urlpatterns = [
    path("runs/", views.run_list, name="run_list"),
    path("runs/export.csv", views.runs_export, name="runs_export"),
    path("runs/<int:pk>/edit", views.run_edit, name="run_edit"),
    path("runs/<int:pk>/archive", views.run_archive, name="run_archive"),
    path("runs/<int:pk>/restore", views.run_restore, name="run_restore"),
    path("api/runs", api.runs, name="api_runs"),
]
