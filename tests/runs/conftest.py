"""Users, runs and metric data for the run pages and the metrics API."""

import pytest

from tests.factories import make_run
from webapp.accounts.models import ApiToken
from webapp.experiments.models import Run


@pytest.fixture
def run(alice):
    return make_run(alice, status=Run.Status.RUNNING, step=10, total_steps=100, eta_seconds=42.0)


@pytest.fixture
def alice_token(alice):
    return ApiToken.issue(alice, "trainer")[1]


@pytest.fixture
def bob_token(bob):
    return ApiToken.issue(bob, "trainer")[1]
