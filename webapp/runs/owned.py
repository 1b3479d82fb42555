"""owned_run: the one way a page or an API view loads a run by id for the person asking.

Another user's run is a 404 exactly like a run that does not exist. The 404 is Django's Http404: a page
answers it with the HTML 404 page, and `@api_view` (webapp.accounts.api_auth) with a JSON error body.
(The metrics ingest API checks the same scope in its write, under the run's lock, and answers the same
NOT_FOUND: webapp.metrics.api.)
"""

from django.http import Http404

from webapp.experiments.models import Run

NOT_FOUND = "run not found"  # the same words for a run of another user


def owned_run(request, pk) -> Run:
    """The request's user's run `pk` (its experiment loaded with it), or Http404."""
    try:
        return Run.objects.for_user(request.user).select_related("experiment").get(pk=pk)
    except Run.DoesNotExist:
        raise Http404(NOT_FOUND) from None
