import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
django_application = get_wsgi_application()

from webapp.core.chunked_bodies import with_chunked_bodies  # noqa: E402  (after Django's set-up)

application = with_chunked_bodies(django_application)
