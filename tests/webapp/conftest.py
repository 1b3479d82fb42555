import pytest

from webapp.experiments.models import Experiment
from webapp.experiments.specs import ExperimentSpec


@pytest.fixture
def make_experiment():
    """make_experiment(owner, name=..., seeds=[1, 2], grid={...}) -> a saved Experiment with runs."""

    def make(owner, name="FrozenLake test", **fields):
        fields.setdefault("env", {"name": "frozenlake", "params": {"size": 4}})
        fields.setdefault("steps", 5)
        return Experiment.create_with_runs(owner, ExperimentSpec(name=name, **fields))

    return make
