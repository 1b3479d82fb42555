"""Every page answers a method it does not take with a 405 naming the ones it does, as the API does: PUT
/runs/2/edit rendered the page, DELETE /tokens/ listed the tokens."""

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

# The API's methods are tested with its errors (test_api_errors), the MLflow protocol's with its own; the
# admin's are Django's.
NOT_OURS = ("admin/", "api/", "ajax-api/", "(?:api|ajax-api)")


def djangos_own(entry: URLPattern) -> bool:
    """A view class of Django's (login, password reset, a redirect): it answers as Django does."""
    return getattr(entry.callback, "view_class", object).__module__.startswith("django.")


def page_paths(patterns=None, prefix=""):
    """Each page's path, with 1 for every id in it (a 405 comes before the view looks anything up)."""
    for entry in get_resolver().url_patterns if patterns is None else patterns:
        route = prefix + str(entry.pattern).lstrip("^")
        if route.startswith(NOT_OURS):
            continue
        if isinstance(entry, URLResolver):
            yield from page_paths(entry.url_patterns, route)
        elif isinstance(entry, URLPattern) and not djangos_own(entry):
            yield "/" + re.sub(r"<[^>]+>", "1", route).rstrip("$")


@pytest.mark.parametrize("path", sorted(set(page_paths())))
def test_a_method_a_page_does_not_take_is_a_405(alice_client, path):
    response = alice_client.generic("DELETE", path)
    assert response.status_code == 405, (path, response.status_code)
    assert "DELETE" not in response["Allow"] and response["Allow"]
