"""Runs with a collapse event and metrics around it."""

import math

import pytest

from tests.factories import make_event, make_experiment, make_run, points
from webapp.experiments.models import Run

EVENT_STEP = 60


@pytest.fixture
def collapsing_run(alice):
    """collapsing_run(**experiment_fields) -> a running run with success and in-group std for steps 0-119:
    success peaks near the event step and falls after it."""

    def make(label="seed 0", **experiment_fields):
        experiment_fields.setdefault("name", "FrozenLake PPO")
        experiment = make_experiment(alice, **experiment_fields)
        run = make_run(
            alice,
            experiment=experiment,
            label=label,
            config={},
            status=Run.Status.RUNNING,
            step=120,
            total_steps=200,
        )
        steps = range(120)
        points(
            run,
            "train/success",
            {step: 0.8 if step < EVENT_STEP else 0.8 * math.exp(-(step - EVENT_STEP) / 10) for step in steps},
        )
        points(run, "train/reward_std_in_group", {step: 0.4 / (1 + step / 20) for step in steps})
        points(run, "train/success", {EVENT_STEP + 1: math.nan})  # a gap, not an error
        return run

    return make


@pytest.fixture
def alert_event(collapsing_run):
    """alert_event(level="collapse", rule="collapse", step=EVENT_STEP, run=None, message=..., **experiment_fields)."""

    def make(
        level="collapse",
        rule="collapse",
        step=EVENT_STEP,
        run=None,
        message="Success collapsed: smoothed train/success 0.3 is 38% of its peak 0.8",
        **experiment_fields,
    ):
        return make_event(
            run or collapsing_run(**experiment_fields),
            step,
            level,
            rule,
            message=message,
            signals={
                "metric": "train/success",
                "value": 0.30000001,
                "peak": 0.8,
                "ratio": 0.375,
                "since_step": step - 4,
                "missing": None,
            },
        )

    return make
