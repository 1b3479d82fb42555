from django.urls import path

from webapp.imports import views

urlpatterns = [
    path("import", views.import_run, name="run_import"),
    path("api/imports", views.imports, name="api_imports"),
]
