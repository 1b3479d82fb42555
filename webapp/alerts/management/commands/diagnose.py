"""manage.py diagnose FILE [--format csv|jsonl] [--overrides JSON]: the Echo Trap detector over a
metrics file, printing its events as JSON lines, exactly as `python -m diagnostics FILE` does."""

import json

from django.core.management.base import BaseCommand, CommandError

from diagnostics import Detector, load_series


class Command(BaseCommand):
    help = __doc__.split(":", 1)[1].strip()

    def add_arguments(self, parser):
        parser.add_argument("file", help="metrics as CSV (a step column) or JSON lines (metrics.jsonl)")
        parser.add_argument("--format", choices=("csv", "jsonl"), help="default: guessed from the content")
        parser.add_argument(
            "--overrides",
            default="{}",
            help='rule parameters as JSON, e.g. \'{"grad_spike": {"tolerance": 5.0}}\'',
        )

    def handle(self, *args, file, format, overrides, **options):
        try:
            overrides = json.loads(overrides)
        except json.JSONDecodeError as error:
            raise CommandError(f"--overrides: not JSON ({error.msg})", returncode=2) from None
        try:
            Detector(overrides)
        except ValueError as error:
            raise CommandError(f"--overrides: {error}", returncode=2) from None
        try:
            series = load_series(file, format)
        except (OSError, ValueError) as error:
            raise CommandError(f"{file}: {error}", returncode=2) from None
        _, events = Detector.replay(series, overrides)
        for event in events:
            self.stdout.write(json.dumps(event))
