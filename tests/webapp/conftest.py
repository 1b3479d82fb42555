import pytest
from django.contrib.auth import get_user_model

from webapp.experiments.models import Experiment
from webapp.experiments.specs import ExperimentSpec


@pytest.fixture
def alice(db):
    return get_user_model().objects.create_user("alice", "alice@example.com", "alice-password-1")


@pytest.fixture
def bob(db):
    return get_user_model().objects.create_user("bob", "bob@example.com", "bob-password-1")


@pytest.fixture
def alice_client(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def make_experiment():
    """make_experiment(owner, name=..., seeds=[1, 2], grid={...}) -> a saved Experiment with runs."""

    def make(owner, name="FrozenLake test", **fields):
        fields.setdefault("env", {"name": "frozenlake", "params": {"size": 4}})
        fields.setdefault("steps", 5)
        return Experiment.create_with_runs(owner, ExperimentSpec(name=name, **fields))

    return make
