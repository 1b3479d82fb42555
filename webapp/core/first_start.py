"""The first start's background work, shown on every page: `./echolab run` answers at once and builds the
tiny local model meanwhile (minutes on a small CPU); its progress lives in a small JSON file that the
serve command writes and this context processor reads, and that is removed when the model is ready."""

import json

from django.conf import settings


def progress_path():
    return settings.VAR_DIR / "first-start.json"


def write(**progress) -> None:
    """{"state": "building" | "failed", "step", "steps", "error"}, replaced atomically."""
    path = progress_path()
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(progress))
    temporary.replace(path)


def clear() -> None:
    progress_path().unlink(missing_ok=True)


def read() -> dict | None:
    try:
        return json.loads(progress_path().read_text())
    except (OSError, ValueError):  # absent (the usual case), or being replaced this instant
        return None


def context(request) -> dict:
    return {"first_start": read()} if request.user.is_authenticated else {}
