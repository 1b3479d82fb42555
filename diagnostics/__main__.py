"""python -m diagnostics FILE [--format csv|jsonl] [--overrides JSON]: print the events as JSON lines."""

import argparse
import json
import math
import os
import sys

from .detector import Detector
from .series import load_series


def main(argv: list[str] | None = None, prog: str = "python -m diagnostics") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split(":")[1].strip())
    parser.add_argument("file", help="metrics as CSV (a step column) or JSON lines (metrics.jsonl)")
    parser.add_argument("--format", choices=("csv", "jsonl"), help="default: guessed from the content")
    parser.add_argument(
        "--overrides",
        default="{}",
        help='rule parameters as JSON, e.g. \'{"grad_spike": {"tolerance": 5.0}}\'',
    )
    args = parser.parse_args(argv)
    try:
        detector = Detector(json.loads(args.overrides))
    except json.JSONDecodeError as error:
        parser.error(f"--overrides: not JSON ({error.msg})")
    except ValueError as error:
        parser.error(f"--overrides: {error}")
    try:
        series = load_series(args.file, args.format)
    except (OSError, ValueError) as error:
        print(f"error: {args.file}: {error}", file=sys.stderr)
        return 2
    try:
        for step, metrics in series:
            for event in detector.update(step, metrics):
                print(json.dumps(_json_ready(event)), flush=True)
    except BrokenPipeError:  # `... | head` stopped reading: not an error (the Python docs' recipe)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    return 0


def _json_ready(value):
    """Valid JSON: a non-finite number (a signal of inf standard errors) is null, as the web app stores it."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _json_ready(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_json_ready(item) for item in value]
    return value


if __name__ == "__main__":
    sys.exit(main())
