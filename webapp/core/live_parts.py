"""Parts of a page that static/js/live_part.js fetches again while runs train (?part=<name>): the server
renders one template for the page and for the refresh alike."""

from django.http import HttpResponseBadRequest


def page_or_part(request, page: str, **parts: str) -> str | HttpResponseBadRequest:
    """The template to render: the page, or with ?part=<name> one of its parts alone; an unknown part is a
    400 naming the choices."""
    part = request.GET.get("part", "")
    if part and part not in parts:
        return HttpResponseBadRequest(
            f"part: {part[:40]!r} is not a choice ({', '.join(parts)})",
            content_type="text/plain; charset=utf-8",
        )
    return parts.get(part, page)
