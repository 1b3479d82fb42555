"""Authentication and error handling shared by every JSON API view.

`@api_view` accepts a session (browser) or `Authorization: Bearer <token>` (scripts), answers JSON
errors with the right status (401, 403, 404, 405, 400) and never lets an exception become a 500 page.
CSRF is enforced for session-authenticated unsafe requests only; a bearer token is not sent
automatically by browsers, so token requests need no CSRF token.
"""

import functools
import logging
import re

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.http import Http404, HttpResponse, QueryDict
from django.http.multipartparser import MultiPartParserError
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt

from diagnostics import gzip_stream
from webapp.accounts.models import ApiToken
from webapp.core import jsonsafe, openapi
from webapp.core.json_response import JsonResponse

logger = logging.getLogger(__name__)


class ApiError(Exception):
    def __init__(self, status: int, message: str, errors: dict | None = None):
        super().__init__(message)
        self.status, self.message, self.errors = status, message, errors

    @classmethod
    def fields(cls, errors: dict[str, str], status: int = 400) -> "ApiError":
        """Bad input, each problem under the field it names; the message is the first of them."""
        field, problem = next(iter(errors.items()))
        return cls(status, f"{field}: {problem}", errors)

    @classmethod
    def field(cls, name: str, problem: str, status: int = 400) -> "ApiError":
        return cls.fields({name: problem}, status)


def error_response(status: int, message: str, errors: dict | None = None) -> JsonResponse:
    body = {"error": message}
    if errors:
        body["errors"] = errors
    return JsonResponse(body, status=status)


def bearer_token(request) -> str | None:
    """The token of `Authorization: Bearer <token>` (the scheme in any case, RFC 7235), else None."""
    scheme, _, token = request.headers.get("Authorization", "").strip().partition(" ")
    return token.strip() if scheme.lower() == "bearer" else None


# RFC 7235: a 401 says which scheme would be accepted.
WWW_AUTHENTICATE = 'Bearer realm="EchoLab API"'


def unauthenticated(message: str) -> JsonResponse:
    response = error_response(401, message)
    response["WWW-Authenticate"] = WWW_AUTHENTICATE
    return response


class _CsrfCheck(CsrfViewMiddleware):
    """Django's CSRF check, answering why it refused (its reason: "CSRF token missing.", "Origin checking
    failed - https://x does not match any trusted origins.") instead of its 403 page."""

    def _reject(self, request, reason):
        return reason


def _csrf_failure(request) -> str | None:
    check = _CsrfCheck(lambda req: None)
    check.process_request(request)
    return check.process_view(request, None, (), {})


def allowed_methods(methods) -> tuple[str, ...]:
    """What a URL taking `methods` answers: HEAD too wherever GET (RFC 9110), and OPTIONS everywhere."""
    return (*methods, "HEAD", "OPTIONS") if "GET" in methods else (*methods, "OPTIONS")


def options_answer(allowed) -> HttpResponse:
    """OPTIONS: 204 with the Allow header, no authentication (as for a preflight)."""
    response = HttpResponse(status=204)
    response["Allow"] = ", ".join(allowed)
    return response


def api_view(methods=("GET",), public: bool = False, repeatable: tuple[str, ...] = ()):
    """`methods`: what the view takes. HEAD is answered wherever GET is (the GET's headers, no body,
    RFC 9110) and OPTIONS everywhere (204 with the Allow header, no authentication, as for a preflight).
    `public`: no authentication (the API's own description, the health check). `repeatable`: the query
    parameters the view reads as lists (?key=a&key=b); any other given twice is a 400 naming it, where
    the view would have read only the last."""
    allowed = allowed_methods(methods)

    def decorate(view):
        def query_checked(request, *args, **kwargs):
            check_query(request, repeatable)
            return view(request, *args, **kwargs)

        @csrf_exempt
        @functools.wraps(view)
        def wrapped(request, *args, **kwargs):
            if request.method == "OPTIONS":
                return options_answer(allowed)
            if request.method not in allowed:
                response = error_response(
                    405, f"method {request.method[:20]} not allowed; use {', '.join(allowed)}"
                )
                response["Allow"] = ", ".join(allowed)
                return response
            head = request.method == "HEAD"
            if head:
                request.method = "GET"  # the view sees the GET it answers
            response = (
                _call(query_checked, request, *args, **kwargs)
                if public
                else _authenticated_call(query_checked, request, *args, **kwargs)
            )
            return without_body(response) if head else response

        return wrapped

    return decorate


def check_query(request, repeatable: tuple[str, ...]) -> None:
    """ApiError naming a query parameter the OpenAPI document does not list for this URL and method (a
    misspelt filter, ?stauts=queued, listed every run), or one given twice that is not read as a list."""
    if request.resolver_match is None:  # a view called without routing (a test's request factory)
        return
    path = openapi.path_template(request.resolver_match.route)
    known = openapi.query_parameters(path, request.method.lower())
    for name in request.GET:
        if known is not None and name not in known:
            takes = ", ".join(sorted(known)) or "none"
            raise ApiError.field(name[:100], f"not a parameter of {request.method} {path} (it takes {takes})")
        count = len(request.GET.getlist(name))
        if count > 1 and name not in repeatable:
            raise ApiError.field(name[:100], f"given {count} times; give it once")


def _authenticated_call(view, request, *args, **kwargs):
    token = bearer_token(request)
    if token is not None:
        user = ApiToken.authenticate(token)
        if user is None:
            return unauthenticated("invalid API token")
        request.user = user
    elif request.user.is_authenticated:
        failure = _csrf_failure(request) if request.method != "GET" else None
        if failure is not None:
            return error_response(
                403,
                f"CSRF check failed: {failure} (a signed-in browser's call sends the csrftoken cookie's value "
                "in the X-CSRFToken header, from this site's own pages; a script sends an API token instead)",
            )
    else:
        return unauthenticated("authentication required: log in or send 'Authorization: Bearer <token>'")
    return _call(view, request, *args, **kwargs)


def _call(view, request, *args, **kwargs):
    try:
        return view(request, *args, **kwargs)
    except ApiError as error:
        return error_response(error.status, error.message, error.errors)
    except Http404 as error:
        return error_response(404, str(error) or "not found")
    except MultiPartParserError as error:
        return error_response(
            400,
            f"body: not valid multipart/form-data: {error}",
            {"body": f"not valid multipart/form-data: {error}"},
        )


def without_body(response):
    """The answer to a HEAD: the GET's status and headers (its Content-Length too), no body."""
    if response.streaming:
        response.streaming_content = iter(())
    else:
        response["Content-Length"] = str(len(response.content))
        response.content = b""
    return response


def json_body(request, max_bytes: int = 10 * 1024 * 1024, items: str = "body"):
    """The request's JSON body, or ApiError(400/413) with a message saying what is wrong. Text that is not
    valid Unicode (JSON can escape a lone surrogate) is refused here for every API, named by its path:
    nothing could store it. `items`: what a top-level list holds, to name its elements by (`points[3]`)."""
    raw = _decoded_body(request, max_bytes)
    if len(raw) > max_bytes:
        raise ApiError.field("body", f"{len(raw)} bytes; the limit is {max_bytes}", 413)
    try:
        body = jsonsafe.loads(raw or b"null")
    except jsonsafe.DuplicateKey as error:  # named where it is: points[17], config.optim
        where = (items + error.path if error.path.startswith("[") else error.path) or "body"
        raise ApiError.field(where, f"{error}: send each key once") from None
    except ValueError as error:  # JSONDecodeError, UnicodeDecodeError, too deep
        hint = (
            " (it looks gzip-compressed: say so with Content-Encoding: gzip)"
            if raw[:2] == gzip_stream.MAGIC
            else ""
        )
        raise ApiError.field("body", f"not valid JSON{hint}: {error}") from None
    if jsonsafe.may_hold_unstorable_text(raw):
        where = jsonsafe.unstorable_text(body, items if isinstance(body, list) else "")
        if where is not None:
            where = where or "body"
            raise ApiError.field(where, jsonsafe.UNSTORABLE_TEXT)
    return body


def no_body(request) -> None:
    """For a call that takes no body (stop, resume, delete): one sent with it is refused naming its first
    field, not silently ignored (a client sending {"from_step": 5} to resume must learn it did nothing).
    Nothing, null and {} are no body, and so is a form with no fields (what a bare POST of Django's test
    client, or of an HTML form, sends). The body is read as every API reads one: gunzipped under
    Content-Encoding: gzip (415 for another encoding), JSON whatever its Content-Type says."""
    raw = _decoded_body(request, max_bytes=64 * 1024)
    body = _sent_fields(request, raw)
    if body is None or body == {}:
        return
    first = next(iter(body), "body") if isinstance(body, dict) else "body"
    raise ApiError.field(first, f"{request.method} {request.path} takes no body; nothing was done")


def _sent_fields(request, raw: bytes):
    """What a body that should be empty holds: its JSON, else a form's fields ({name: True}), else the
    body as it came (not empty: refused as a whole)."""
    try:
        return jsonsafe.loads(raw or b"null")
    except ValueError:
        pass
    if request.content_type == "application/x-www-form-urlencoded":
        try:
            return dict.fromkeys(QueryDict(raw.decode("ascii")), True)  # percent-encoded: ASCII on the wire
        except UnicodeDecodeError:
            return raw
    if request.content_type == "multipart/form-data" and request.method == "POST" and not gzipped(request):
        return dict.fromkeys([*request.POST, *request.FILES], True)
    return raw


def _decoded_body(request, max_bytes: int) -> bytes:
    """The body as sent, or gunzipped under `Content-Encoding: gzip` (never past max_bytes: a small body
    must not inflate into gigabytes); 415 for any other encoding, 400 for a broken gzip stream."""
    try:
        sent = request.body
    except RequestDataTooBig:  # beyond DATA_UPLOAD_MAX_MEMORY_SIZE (or a Content-Length that says so)
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raise ApiError.field("body", f"larger than the server's limit of {limit} bytes", 413) from None
    if not gzipped(request):
        return sent
    try:
        return b"".join(gzip_stream.inflate([sent], max_bytes))
    except gzip_stream.Oversized as error:
        raise ApiError.field("body", str(error), 413) from None
    except ValueError as error:
        raise ApiError.field("body", f"{error}, though Content-Encoding says gzip") from None


def gzipped(request) -> bool:
    """Whether the body comes gzip-compressed (`Content-Encoding: gzip`); 415 naming any other encoding."""
    encoding = request.headers.get("Content-Encoding", "").strip().lower()
    if encoding in ("", "identity"):
        return False
    if encoding in ("gzip", "x-gzip"):
        return True
    problem = f"{encoding[:40]!r} is not supported; send the body as it is or gzip-compressed"
    raise ApiError.field("Content-Encoding", problem, 415)


def int_param(request, name: str, default=None, low=None, high=None):
    """?name=N as an int within [low, high], `default` when absent; ApiError naming the parameter."""
    if name not in request.GET:
        return default
    text = request.GET[name]
    # ASCII digits only: int() also reads "1_0", other scripts' digits and spaces around them; "?name="
    # (present but empty) is a 400 too, the schema says integer; and no more digits than a 64-bit integer
    # has.
    if not re.fullmatch(r"-?[0-9]{1,19}", text):
        raise ApiError.field(name, f"must be an integer, got {text[:40]!r}")
    value = int(text)
    if (low is not None and value < low) or (high is not None and value > high):
        bounds = f"at least {low}" if high is None else f"between {low} and {high}"
        raise ApiError.field(name, f"must be {bounds}, got {value}")
    return value
