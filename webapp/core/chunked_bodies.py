"""Request bodies sent with `Transfer-Encoding: chunked`, as a streaming client sends them: no
Content-Length. Django reads a body only as far as CONTENT_LENGTH says, so without one it read nothing,
and every API took such a body as empty (a metrics batch refused as "must be a list of points", an MLflow
`runs/create` that lost its name and tags, a stop that ignored the body it must refuse). The server
(gunicorn) takes the chunking off `wsgi.input`; this reads it to its end into a spooled file, up to the
largest body its URL takes, and sets CONTENT_LENGTH, so that Django and the views see the body as if its
length had been sent. Past that limit it stops reading and answers 413."""

import json
import re
import tempfile

from django.conf import settings

_READ = 64 * 1024
_IN_MEMORY = 1024 * 1024  # beyond this the body spools to a temporary file (an import of 50 MB)
_MULTIPART_FRAMING = 1024 * 1024  # a form's boundaries and fields around an import's file
_IMPORT_PATHS = ("/import", "/api/imports")  # webapp.imports.urls: a metrics file, IMPORT_MAX_BYTES
_ARTIFACT_PATHS = re.compile(r"/(?:api|ajax-api)/2\.0/mlflow-artifacts/artifacts/")  # webapp.tracking.urls


def body_limit(path: str) -> int:
    """The largest body the URL at `path` takes: an import's file in its form, or any other body Django
    takes (a metrics batch)."""
    if path in _IMPORT_PATHS:
        return max(settings.IMPORT_MAX_BYTES + _MULTIPART_FRAMING, settings.DATA_UPLOAD_MAX_MEMORY_SIZE)
    return settings.DATA_UPLOAD_MAX_MEMORY_SIZE


def is_chunked(environ) -> bool:
    """A body sent with Transfer-Encoding: chunked and no Content-Length (a WSGI environ, or request.META)."""
    return "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower() and not environ.get(
        "CONTENT_LENGTH"
    )


def _too_large(start_response, limit: int):
    body = json.dumps({"error": f"body: larger than the server's limit of {limit} bytes"}).encode()
    start_response(
        "413 Request Entity Too Large",
        [("Content-Type", "application/json"), ("Content-Length", str(len(body))), ("Connection", "close")],
    )
    return [body]


class _ClosingToo:
    """The application's response, which also closes the spooled body when the server closes it."""

    def __init__(self, response, body):
        self.response, self.body = response, body

    def __iter__(self):
        return iter(self.response)

    def close(self):
        try:
            if hasattr(self.response, "close"):
                self.response.close()
        finally:
            self.body.close()


def with_chunked_bodies(application):
    """The WSGI `application`, reading a chunked body whole before it sees the request."""

    def dechunked(environ, start_response):
        # An MLflow artifact's body is the view's to read, after the token is checked, up to its own limit
        # (webapp.tracking.views._upload): spooled here, anyone could fill the disk without one.
        if not is_chunked(environ) or _ARTIFACT_PATHS.match(environ.get("PATH_INFO", "")):
            return application(environ, start_response)
        limit = body_limit(environ.get("PATH_INFO", ""))
        body = tempfile.SpooledTemporaryFile(max_size=_IN_MEMORY)
        size = 0
        while piece := environ["wsgi.input"].read(_READ):
            size += len(piece)
            if size > limit:
                body.close()
                return _too_large(start_response, limit)
            body.write(piece)
        body.seek(0)
        environ["wsgi.input"], environ["CONTENT_LENGTH"] = body, str(size)
        return _ClosingToo(application(environ, start_response), body)

    return dechunked
