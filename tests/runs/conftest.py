"""Users, runs and metric data for the run pages and the metrics API."""

import pytest
from django.db import connection

from webapp.accounts.models import ApiToken
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint, MetricRollup


def make_run(user, **fields) -> Run:
    experiment = Experiment.objects.create(owner=user, name=f"{user.username}'s experiment", config={})
    fields.setdefault("label", "seed=1")
    fields.setdefault("config", {"model": {"name": "tiny"}, "rollout": {"group_size": 4}})
    return Run.objects.create(experiment=experiment, **fields)


def insert_series(run, key, steps: int, expression="sin(s / 100.0)"):
    """steps points (0..steps-1) of `key`, value = a SQL expression of s, written in one statement."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {MetricPoint._meta.db_table} (run_id, key, step, value) "
            f"SELECT %s, %s, s, {expression} FROM generate_series(0, %s) AS s",
            [run.pk, key, steps - 1],
        )
    MetricRollup.refresh(run.pk)  # as MetricPoint.upsert does for points written through it


@pytest.fixture
def run(alice):
    return make_run(alice, status=Run.Status.RUNNING, step=10, total_steps=100, eta_seconds=42.0)


@pytest.fixture
def alice_token(alice):
    return ApiToken.issue(alice, "trainer")[1]


@pytest.fixture
def bob_token(bob):
    return ApiToken.issue(bob, "trainer")[1]
