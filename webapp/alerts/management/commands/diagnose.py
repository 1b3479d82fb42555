"""manage.py diagnose FILE [--format csv|jsonl] [--overrides JSON]: the Echo Trap detector over a
metrics file, printing its events as JSON lines. It is `python -m diagnostics`, run under manage.py."""

import sys

from django.core.management.base import BaseCommand

from diagnostics.__main__ import main


class Command(BaseCommand):
    help = __doc__.split(":", 1)[1].strip()

    def run_from_argv(self, argv):
        """The diagnostics CLI parses the arguments, prints, and gives the exit status (2 for bad input)."""
        sys.exit(main(argv[2:], prog="manage.py diagnose"))
