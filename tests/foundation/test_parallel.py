"""Parallel test processes keep apart: each its own broker database (tests/parallel.py)."""

import os
import subprocess
import sys

import pytest

from tests.helpers import REPO_ROOT
from tests.parallel import own_broker


@pytest.mark.parametrize(
    ("url", "worker", "expected"),
    [
        ("redis://127.0.0.1:6379/15", 0, "redis://127.0.0.1:6379/14"),
        ("redis://127.0.0.1:6379/15", 1, "redis://127.0.0.1:6379/13"),
        ("redis://127.0.0.1:6379", 0, "redis://127.0.0.1:6379/15"),
        (
            "rediss://:secret@cache:6380/2?ssl_cert_reqs=none",
            3,
            "rediss://:secret@cache:6380/14?ssl_cert_reqs=none",
        ),
    ],
)
def test_each_worker_gets_a_broker_database_of_its_own(url, worker, expected):
    assert own_broker(url, worker) == expected


def test_four_workers_never_share_a_database_or_take_the_one_given():
    given = "redis://127.0.0.1:6379/0"
    databases = {own_broker(given, worker) for worker in range(4)}
    assert len(databases) == 4 and given not in databases


@pytest.mark.parametrize(
    ("url", "worker", "message"),
    [
        ("amqp://guest@rabbit//", 0, "need a redis:// broker"),
        ("redis://127.0.0.1:6379/15", 15, "at most 15 parallel test processes"),
    ],
)
def test_a_broker_the_workers_would_share_is_refused(url, worker, message):
    with pytest.raises(ValueError, match=message):
        own_broker(url, worker)


PROBE = """
import os

import pytest


@pytest.mark.stops_services
def test_stops_a_service():
    pass


@pytest.mark.parametrize("i", range(4))
def test_notes_its_environment(i):
    with open(os.environ["PROBE_OUT"], "a") as out:
        names = ("PYTEST_XDIST_WORKER", "CELERY_BROKER_URL", "ECHOLAB_VAR")
        out.write(" ".join(os.environ[name] for name in names) + "\\n")
"""


@pytest.mark.slow
def test_workers_get_their_own_broker_and_var_and_service_stops_run_apart(tmp_path):
    (tmp_path / "test_probe.py").write_text(PROBE)
    out = tmp_path / "environments.txt"
    env = {
        **{
            name: value for name, value in os.environ.items() if not name.startswith("PYTEST_XDIST")
        },  # not ours
        "PROBE_OUT": str(out),
        "CELERY_BROKER_URL": "redis://127.0.0.1:6379/9",
        "ECHOLAB_VAR": str(tmp_path / "var"),
    }

    def pytest_run(*args):
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(REPO_ROOT / "pyproject.toml"),
            "-p",
            "no:cacheprovider",
        ]
        done = subprocess.run(
            [*command, *args, str(tmp_path / "test_probe.py")],
            cwd=REPO_ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        return done.stdout.strip().splitlines()[-1]

    assert " 4 passed in " in pytest_run("-n", "2", "--services-stopped", "skip")  # not the one that stops
    seen = {tuple(line.split()) for line in out.read_text().splitlines()}
    assert seen == {
        ("gw0", "redis://127.0.0.1:6379/8", str(tmp_path / "var" / "gw0")),
        ("gw1", "redis://127.0.0.1:6379/7", str(tmp_path / "var" / "gw1")),
    }
    assert "1 passed, 4 deselected" in pytest_run("--services-stopped", "only")
