"""Running the tests in parallel processes (pytest-xdist), loaded with `-p tests.parallel` before Django's
settings are read. Each worker process gets its own Celery broker database and var/ folder, as pytest-django
already gives it its own test database: two workers sharing one broker would take each other's tasks, and
sharing var/ they would write the same run's files (run ids start at 1 in every test database). The few tests
that stop the machine's Postgres or Redis would break every other process's connections: `--services-stopped`
leaves them out of a parallel run, or runs only them."""

import os
from urllib.parse import urlsplit, urlunsplit

from webapp.environment import var_dir

WORKER = os.environ.get("PYTEST_XDIST_WORKER", "")  # "gw0", "gw1", ... in a worker; unset otherwise


def own_broker(url: str, worker_number: int) -> str:
    """A redis URL's database, one below the given one per worker: redis://h:6379/15 -> /14 for gw0, /13 for gw1.
    Redis has 16 databases, so up to 15 workers get one each that is not the given one."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ValueError(f"parallel test processes need a redis:// broker to keep apart, got {url!r}")
    if worker_number >= 15:
        raise ValueError(
            f"at most 15 parallel test processes share one Redis, this is number {worker_number + 1}"
        )
    database = int(parts.path.strip("/") or 0)
    return urlunsplit(parts._replace(path=f"/{(database - 1 - worker_number) % 16}"))


if WORKER:
    number = int(WORKER.removeprefix("gw"))
    if os.environ.get("CELERY_BROKER_URL"):  # unset: the filesystem broker, under each worker's own var/
        os.environ["CELERY_BROKER_URL"] = own_broker(os.environ["CELERY_BROKER_URL"], number)
    os.environ["ECHOLAB_VAR"] = str(var_dir() / WORKER)


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
    kept, left_out = [], []
    for item in items:
        (kept if (item.get_closest_marker("stops_services") is not None) == wanted else left_out).append(item)
    config.hook.pytest_deselected(items=left_out)
    items[:] = kept
