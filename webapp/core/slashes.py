"""Pages answer with or without a trailing slash. Django's APPEND_SLASH adds a missing one (/runs ->
/runs/); this takes off one that a page's address does not have (/import/ -> /import), so a typed address
finds its page either way. Not under /api/: a client there is told its URL matches nothing."""

from django.http import HttpResponsePermanentRedirect
from django.urls import Resolver404, resolve


class RemoveSlashMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        response = self.get_response(request)
        path = request.path_info
        if (
            response.status_code != 404
            or request.method not in ("GET", "HEAD")
            or not path.endswith("/")
            or path == "/"
            or path.startswith("/api/")
        ):
            return response
        try:
            resolve(path[:-1])
        except Resolver404:
            return response
        query = request.META.get("QUERY_STRING", "")
        return HttpResponsePermanentRedirect(request.path[:-1] + (f"?{query}" if query else ""))
