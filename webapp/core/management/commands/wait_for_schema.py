"""`python manage.py wait_for_schema`: wait until the database's schema is this code's, then exit 0; exit 1
after --timeout. The compose file's workers and beat start with it, so that on an upgrade none of them
trains or sweeps against the old schema while the web container's `migrate` is still running."""

from django.core.management.base import BaseCommand, CommandError

from webapp.core import health


class Command(BaseCommand):
    help = "Wait until the database is reachable and fully migrated for this code (exit 1 after --timeout)."

    def add_arguments(self, parser):
        parser.add_argument("--timeout", type=float, default=600, help="seconds to wait (default 600)")

    def handle(self, *args, timeout, **options):
        def say(error):
            self.stderr.write(f"waiting for the database: {error}")

        error = health.wait_until_ready(say, timeout=timeout)
        if error:
            raise CommandError(f"the database is not ready after {timeout:g} s: {error}")
