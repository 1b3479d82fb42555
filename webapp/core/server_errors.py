"""What a request that fails on the server answers. Under /api/ it is JSON like every API answer (the
MLflow endpoint's own shape under .../mlflow/), never Django's HTML error page; a database that is busy
(SQLite's write lock held by a long import, say) or unreachable is a 503 with Retry-After, which
clients such as `mlflow` retry, not a 500."""

import logging
import re

import psycopg
from django.conf import settings
from django.core.exceptions import DisallowedHost, TooManyFieldsSent, TooManyFilesSent
from django.db import OperationalError
from django.http import HttpResponse
from django.shortcuts import render
from django.utils.regex_helper import _lazy_re_compile
from django.views.debug import SafeExceptionReporterFilter
from django.views.defaults import bad_request as html_bad_request
from django.views.defaults import server_error as html_server_error

from webapp.core.json_response import JsonResponse, is_api_path

logger = logging.getLogger(__name__)
RETRY_AFTER_SECONDS = 5
UNAVAILABLE = "the database is busy or unreachable; retry the request"
INTERNAL = "internal server error (logged on the server)"


class SecretsFilter(SafeExceptionReporterFilter):
    """DEBUG's error pages and error emails hide settings named like a secret; a broker's URL holds its
    password too (CELERY_BROKER_URL showed it, where the database's and the mail server's were hidden)."""

    hidden_settings = _lazy_re_compile(
        "API|AUTH|TOKEN|KEY|SECRET|PASS|SIGNATURE|HTTP_COOKIE|BROKER_URL|BROKER_TRANSPORT", flags=re.I
    )


def answer(request, status: int, message: str, errors: dict | None = None):
    """The JSON answer of an API path (MLflow's shape under .../mlflow/), else None."""
    path = request.path
    if ("/mlflow/" in path or "/mlflow-artifacts/" in path) and path.startswith(("/api/", "/ajax-api/")):
        code = {400: "BAD_REQUEST", 503: "TEMPORARILY_UNAVAILABLE"}.get(status, "INTERNAL_ERROR")
        return JsonResponse({"error_code": code, "message": message}, status=status)
    if is_api_path(path):
        return JsonResponse({"error": message, "errors": errors or {}}, status=status)
    return None


class DatabaseUnavailableMiddleware:
    """OperationalError from the database -> 503 (the request's transaction, if any, rolled back). psycopg's
    own, from code that talks to it directly (the ingest's pipelined write), as Django's."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        if not isinstance(exception, (OperationalError, psycopg.OperationalError)):
            return None
        logger.warning("database unavailable on %s %s: %s", request.method, request.path, exception)
        response = answer(request, 503, UNAVAILABLE) or HttpResponse(
            f"EchoLab: {UNAVAILABLE}.\n", status=503, content_type="text/plain; charset=utf-8"
        )
        response["Retry-After"] = str(RETRY_AFTER_SECONDS)
        return response


def server_error(request):
    """handler500: JSON under /api/, the HTML page elsewhere (Django has logged the exception)."""
    return answer(request, 500, INTERNAL) or html_server_error(request)


def bad_request(request, exception):
    """handler400 (a request Django refuses before its view can answer: a Host header not in
    ALLOWED_HOSTS, more query parameters than it parses): JSON under /api/, the HTML page elsewhere."""
    return answer(request, 400, _problem(exception)) or html_bad_request(request, exception)


def csrf_failure(request, reason=""):
    """CSRF_FAILURE_VIEW: a form posted from a page too old for this session (signed out and in again
    since, in another tab; the cookie cleared; the server's secret changed) says so, and what to do, in
    the site's own page, not Django's technical one. JSON under /api/, as every API answer."""
    message = "the form's security token is missing or out of date; reload the page and send it again"
    return answer(request, 403, message) or render(
        request,
        "403_csrf.html",
        # Django's own words for it; the origin's is a set-up problem, not the user's.
        {"reason": reason, "origin_refused": reason.startswith("Origin checking failed")},
        status=403,
    )


def _problem(exception) -> str:
    if isinstance(exception, DisallowedHost):
        return "Host: not a host this server answers to"
    if isinstance(exception, TooManyFieldsSent):
        limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
        return f"more than {limit:,} query parameters or form fields; the limit is {limit:,}: send fewer"
    if isinstance(exception, TooManyFilesSent):
        return f"more than {settings.DATA_UPLOAD_MAX_NUMBER_FILES:,} files in one request"
    return "bad request"


class WithoutTraceback(logging.Filter):
    """A record logged with its exception's traceback, kept to its message: Django logs a request it
    refuses as suspicious (a Host header not ours, 2,000 query parameters: anyone can send them) as an
    error with a traceback, which says nothing more than the message."""

    def filter(self, record):
        record.exc_info = record.exc_text = None
        return True
