"""First start: a demo experiment for the first superuser, so a new install has something training
on CPU at once: FrozenLake, the tiny model, StarPO vs StarPO-S, a few dozen small steps."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from webapp.experiments.models import Experiment
from webapp.experiments.specs import ExperimentSpec

DEMO_NAME = "Demo: FrozenLake StarPO vs StarPO-S"


def demo_spec() -> ExperimentSpec:
    return ExperimentSpec(
        name=DEMO_NAME,
        description="StarPO against StarPO-S (variance filter, no KL, asymmetric clipping) on a 4x4 "
        "slippery FrozenLake, with the tiny CPU model. Watch success and in-group reward std.",
        env={"name": "frozenlake", "params": {"size": 4, "slippery": True}},
        preset="starpo",
        grid={"preset": ["starpo", "starpo-s"]},
        seeds=[1],
        steps=30,
        # Small batches so both runs finish in minutes on a laptop CPU.
        overrides={
            "rollout": {"env_groups": 4, "group_size": 4, "val_seeds": 16},
            "optim": {"mini_batch_size": 16, "micro_batch_size": 8},
        },
    )


class Command(BaseCommand):
    help = f"Create the demo experiment ({DEMO_NAME!r}) for the first superuser, once."

    def handle(self, **options):
        owner = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
        if owner is None:
            self.stdout.write("No superuser yet: no demo experiment.")
            return
        if Experiment.objects.filter(name=DEMO_NAME).exists():
            return
        experiment = Experiment.create_with_runs(owner, demo_spec())
        runs = experiment.runs.count()
        self.stdout.write(
            self.style.SUCCESS(
                f"Created demo experiment {experiment.name!r} ({runs} runs) for {owner.username}"
            )
        )
