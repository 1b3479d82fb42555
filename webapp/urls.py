from django.contrib import admin
from django.urls import include, path

from webapp.core import views as core_views

urlpatterns = [
    path("healthz", core_views.healthz, name="healthz"),
    path("api/schema", core_views.api_schema, name="api_schema"),
    path("admin/", admin.site.urls),
    path("", include("webapp.accounts.urls")),
    path("", include("webapp.experiments.urls")),
    path("", include("webapp.metrics.urls")),
    path("", include("webapp.imports.urls")),
    path("", include("webapp.compare.urls")),
    path("", include("webapp.runs.urls")),
]
