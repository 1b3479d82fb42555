"""Running the tests in parallel processes (pytest-xdist), loaded with `-p tests.parallel` before Django's
settings are read. Each worker process gets its own Celery broker database and var/ folder, as pytest-django
already gives it its own test database: two workers sharing one broker would take each other's tasks, and
sharing var/ they would write the same run's files (run ids start at 1 in every test database). The few tests
that stop the machine's Postgres or Redis would break every other process's connections: `--services-stopped`
leaves them out of a parallel run, or runs only them."""

import os
import re
from pathlib import Path

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... in a worker; unset otherwise


def own_broker(url: str, worker_number: int) -> str:
    """A redis URL's database, one below the given one per worker: redis://h:6379/15 -> /14 for gw0, /13 for gw1."""
    match = re.fullmatch(r"(rediss?://[^/?]+)(?:/(\d*))?(\?.*)?", url)
    if not match:
        return url  # another transport: the tests use Redis; `./echolab test` runs them against it
    database = int(match.group(2) or 0)
    return f"{match.group(1)}/{(database - 1 - worker_number) % 16}{match.group(3) or ''}"


if WORKER:
    number = int(WORKER.removeprefix("gw"))
    if os.environ.get("CELERY_BROKER_URL"):
        os.environ["CELERY_BROKER_URL"] = own_broker(os.environ["CELERY_BROKER_URL"], number)
    var = os.environ.get("ECHOLAB_VAR") or str(Path(__file__).resolve().parent.parent / "var")
    os.environ["ECHOLAB_VAR"] = os.path.join(var, WORKER)


def pytest_addoption(parser):
    parser.addoption(
        "--services-stopped",
        choices=("run", "skip", "only"),
        default="run",
        help="tests marked stops_services (they stop the machine's Postgres or Redis): run them with the rest "
        "(the default), leave them out, or run only them. ./echolab test leaves them out of its parallel "
        "processes and runs them afterwards in one, while nothing else runs.",
    )


def pytest_collection_modifyitems(config, items):
    choice = config.getoption("--services-stopped")
    if choice == "run":
        return
    wanted = choice == "only"
    kept = [item for item in items if (item.get_closest_marker("stops_services") is not None) == wanted]
    config.hook.pytest_deselected(items=[item for item in items if item not in kept])
    items[:] = kept
