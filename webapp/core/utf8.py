"""Query strings and form bodies that are not UTF-8. Django reads each byte it cannot decode as U+FFFD, so
`?name=%ff` made an experiment named "\ufffd" and a search for it, without a word: here such a request is
a 400 naming the parameter or field, before any view sees it."""

from urllib.parse import unquote_to_bytes

from django.shortcuts import render

from webapp.core.server_errors import answer

FORM = "application/x-www-form-urlencoded"
NOT_UTF8 = "not UTF-8 text: percent-encode the UTF-8 bytes of each character"


def first_not_utf8(encoded: bytes, whole: str) -> str | None:
    """The name of the first pair of a query string or urlencoded form whose value is not UTF-8 once
    percent-decoded, `whole` where a name is not (a form in UTF-16, say), else None."""
    for pair in encoded.split(b"&"):
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


class Utf8InputMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        where, name = "parameter", first_not_utf8(_query_bytes(request), "query")
        # A compressed body is the API's to read (webapp.accounts.api_auth): no page takes one.
        form = request.method == "POST" and request.content_type == FORM
        if name is None and form and not request.headers.get("Content-Encoding"):
            where, name = "field", first_not_utf8(request.body, "body")
        if name is None:
            return self.get_response(request)
        message = f"{name}: {NOT_UTF8}"
        said = f"The {where} {name}" if name not in ("query", "body") else f"The {name}"
        return answer(request, 400, message, {name: NOT_UTF8}) or render(
            request, "bad_input.html", {"problem": f"{said}: {NOT_UTF8}."}, status=400
        )
