"""Parallel test processes keep apart: each its own broker database (tests/parallel.py)."""

import pytest

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
        ("amqp://guest@rabbit//", 0, "amqp://guest@rabbit//"),
    ],
)
def test_each_worker_gets_a_broker_database_of_its_own(url, worker, expected):
    assert own_broker(url, worker) == expected


def test_four_workers_never_share_a_database_or_take_the_one_given():
    given = "redis://127.0.0.1:6379/0"
    databases = {own_broker(given, worker) for worker in range(4)}
    assert len(databases) == 4 and given not in databases
