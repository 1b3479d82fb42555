"""owned_run: the one way a page or an API view loads a run by id for the person asking.

Another user's run is a 404 exactly like a run that does not exist. The 404 is Django's Http404: a page
answers it with the HTML 404 page, and `@api_view` (webapp.accounts.api_auth) with a JSON error body.
"""

from django.shortcuts import get_object_or_404

from webapp.experiments.models import Run


def owned_run(request, pk) -> Run:
    """The request's user's run `pk` (its experiment loaded with it), or Http404."""
    return get_object_or_404(Run.objects.for_user(request.user).select_related("experiment"), pk=pk)
