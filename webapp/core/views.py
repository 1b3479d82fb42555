from django.shortcuts import redirect
from django.templatetags.static import static
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from django.views.defaults import page_not_found

from webapp.accounts.api_auth import api_view
from webapp.core import health, openapi
from webapp.core.json_response import JsonResponse, is_api_path


@never_cache
@api_view(public=True)
def healthz(request):
    database = health.database_error()
    checks = {
        "database": database,
        # a database it cannot reach has no schema to judge
        "schema": health.schema_error() if database is None else "database not reachable",
        "broker": health.broker_error(),
    }
    if request.GET.get("workers") == "1":  # for monitoring, not a load balancer: it asks the workers (1 s)
        checks["sweeper"] = health.sweeper_error() if database is None else "database not reachable"
        checks["gpu_workers"] = (
            health.gpu_workers_error() if checks["broker"] is None else "broker not reachable"
        )
    body = {
        name: {"ok": error is None, **({"error": error} if error else {})} for name, error in checks.items()
    }
    healthy = all(error is None for error in checks.values())
    body["status"] = "ok" if healthy else "unavailable"
    return JsonResponse(body, status=200 if healthy else 503)


@never_cache
@api_view(public=True)
def api_schema(request):
    """The OpenAPI document (webapp/core/openapi.yaml) as JSON; public, like any API description."""
    return JsonResponse(openapi.document())


def not_found(request, exception):
    if is_api_path(request.path):
        return JsonResponse({"error": f"no API endpoint or object at {request.path[:200]}"}, status=404)
    return page_not_found(request, exception)


@require_safe
def favicon(request):
    """Browsers ask for /favicon.ico whatever the page's <link rel="icon">: point them at the real one."""
    return redirect(static("favicon.svg"), permanent=True)
