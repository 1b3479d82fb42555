"""seed_demo: the first superuser gets one demo experiment, once."""

from django.contrib.auth import get_user_model
from django.core.management import call_command

from webapp.experiments.management.commands.seed_demo import DEMO_NAME
from webapp.experiments.models import Experiment


def test_demo_is_created_once_for_the_first_superuser(db):
    call_command("seed_demo")
    assert not Experiment.objects.exists()  # no superuser yet
    admin = get_user_model().objects.create_superuser("admin", "admin@localhost", "pw")
    get_user_model().objects.create_superuser("later", "later@localhost", "pw")
    call_command("seed_demo")
    call_command("seed_demo")
    experiment = Experiment.objects.get()
    assert experiment.name == DEMO_NAME and experiment.owner == admin
    runs = {run.label: run.config for run in experiment.runs.all()}
    assert set(runs) == {"seed=0 preset=starpo", "seed=0 preset=starpo-s"}
    for config in runs.values():
        assert config["env"]["name"] == "bandit" and config["model"]["name"] == "tiny"
        assert config["schedule"]["steps"] == 60
    assert runs["seed=0 preset=starpo-s"]["algorithm"]["filter"] == "top_ratio"
    assert runs["seed=0 preset=starpo"]["algorithm"]["filter"] == "none"
