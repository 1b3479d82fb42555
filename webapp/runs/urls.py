from django.urls import path

from webapp.runs import api, views

urlpatterns = [
    path("runs/", views.run_list, name="run_list"),
    path("runs/export.csv", views.runs_export, name="runs_export"),
    path("runs/<id:pk>/edit", views.run_edit, name="run_edit"),
    path("runs/<id:pk>/archive", views.run_archive, name="run_archive"),
    path("runs/<id:pk>/restore", views.run_restore, name="run_restore"),
    path("api/runs", api.runs, name="api_runs"),
]
