from django.contrib import admin
from django.urls import include, path, register_converter

from webapp.core import views as core_views
from webapp.core.converters import IdConverter

register_converter(IdConverter, "id")
# Under /api/, a URL that matches nothing (a non-integer id, say) is a JSON 404 like every API error.
handler404 = "webapp.core.views.not_found"
handler500 = "webapp.core.server_errors.server_error"
handler400 = "webapp.core.server_errors.bad_request"

urlpatterns = [
    path("healthz", core_views.healthz, name="healthz"),
    path("favicon.ico", core_views.favicon),
    path("api/schema", core_views.api_schema, name="api_schema"),
    path("admin/", admin.site.urls),
    path("", include("webapp.accounts.urls")),
    path("", include("webapp.experiments.urls")),
    path("", include("webapp.metrics.urls")),
    path("", include("webapp.imports.urls")),
    path("", include("webapp.compare.urls")),
    path("", include("webapp.tracking.urls")),
    path("", include("webapp.runs.urls")),
]
