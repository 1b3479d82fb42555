"""Query strings and form bodies that are not UTF-8. Django reads each byte it cannot decode as U+FFFD, so
`?name=%ff` made an experiment named "\ufffd" and a search for it, without a word: here such a request is
a 400 naming the parameter or field, before any view sees it."""

from contextlib import suppress
from urllib.parse import unquote_to_bytes

from django.conf import settings
from django.core.exceptions import RequestDataTooBig
from django.shortcuts import render

from webapp.core.json_response import is_api_path
from webapp.core.server_errors import answer

FORM = "application/x-www-form-urlencoded"
NOT_UTF8 = "not UTF-8 text: percent-encode the UTF-8 bytes of each character"


def first_not_utf8(encoded: bytes, whole: str) -> str | None:
    """The name of the first pair of a query string or urlencoded form whose value is not UTF-8 once
    percent-decoded, `whole` where a name is not (a form in UTF-16, say), else None. One pass over the
    whole text first ("&" and "=" are ASCII: if it decodes, every pair does); pair by pair only when it
    does not, and no further than the fields Django would parse (a body of 4 MiB of "&" took 3 s)."""
    try:
        unquote_to_bytes(encoded.replace(b"+", b" ")).decode()
        return None
    except UnicodeDecodeError:
        pass
    limit = settings.DATA_UPLOAD_MAX_NUMBER_FIELDS
    for index, pair in enumerate(encoded.split(b"&", limit) if limit else encoded.split(b"&")):
        if index == limit:  # the rest, beyond the fields Django parses, holds what is not UTF-8
            return whole
        name, _, value = (unquote_to_bytes(part.replace(b"+", b" ")) for part in pair.partition(b"="))
        try:
            name = name.decode()
        except UnicodeDecodeError:
            return whole
        try:
            value.decode()
        except UnicodeDecodeError:
            return name[:100] or whole
    return None


def _query_bytes(request) -> bytes:
    # WSGI hands the query string as bytes read as Latin-1; a test client may hand it as text.
    query = request.META.get("QUERY_STRING", "")
    try:
        return query.encode("iso-8859-1")
    except UnicodeEncodeError:
        return query.encode()


def _api_body(path: str) -> bool:
    """Whether the path's body is read by the API (JSON, or an import's raw file), never as a form."""
    return is_api_path(path) or path.startswith("/ajax-api/")


class Utf8InputMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where, name = "parameter", first_not_utf8(_query_bytes(request), "query")
        # A compressed body is the API's to read (webapp.accounts.api_auth): no page takes one. Nor is any
        # body under /api/ a form, whatever its Content-Type: curl's `--data-binary @metrics.csv` (the
        # README's import) labels a file as one, and a CSV holding "%ff", or a gzipped file, was refused
        # here as a form that is not UTF-8 ("percent-encode ..."), before the API read it as the file it is.
        form = request.method == "POST" and request.content_type == FORM and not _api_body(request.path)
        if name is None and form and not request.headers.get("Content-Encoding"):
            with suppress(RequestDataTooBig):  # the view's to refuse, as it refuses every body over the limit
                where, name = "field", first_not_utf8(request.body, "body")
        if name is None:
            return self.get_response(request)
        message = f"{name}: {NOT_UTF8}"
        said = f"The {where} {name}" if name not in ("query", "body") else f"The {name}"
        return answer(request, 400, message, {name: NOT_UTF8}) or render(
            request, "bad_input.html", {"problem": f"{said}: {NOT_UTF8}."}, status=400
        )
