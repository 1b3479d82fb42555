from django.http import JsonResponse
from django.shortcuts import redirect
from django.templatetags.static import static
from django.views.decorators.cache import never_cache

from webapp.core import health, openapi


@never_cache
def healthz(request):
    checks = {"database": health.database_error(), "broker": health.broker_error()}
    body = {
        name: {"ok": error is None, **({"error": error} if error else {})} for name, error in checks.items()
    }
    healthy = all(error is None for error in checks.values())
    body["status"] = "ok" if healthy else "unavailable"
    return JsonResponse(body, status=200 if healthy else 503)


@never_cache
def api_schema(request):
    """The OpenAPI document (webapp/core/openapi.yaml) as JSON; public, like any API description."""
    return JsonResponse(openapi.document())


def favicon(request):
    """Browsers ask for /favicon.ico whatever the page's <link rel="icon">: point them at the real one."""
    return redirect(static("favicon.svg"), permanent=True)
