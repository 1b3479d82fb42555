"""First start: a demo experiment for the first superuser, so a new install has something training
on CPU at once: Bandit, the tiny model, StarPO vs StarPO-S, both learning within minutes."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from webapp.experiments.models import Experiment
from webapp.experiments.specs import ExperimentSpec

DEMO_NAME = "Demo: Bandit StarPO vs StarPO-S"


def demo_spec() -> ExperimentSpec:
    # Bandit, because the tiny model learns it on a CPU in minutes (docs/BENCHMARKS.md, "Bandit, StarPO and
    # StarPO-S": train success 0.3-0.4 -> 0.9 in 33-68 steps); on FrozenLake it stays at chance, and a demo
    # of noise shows nothing the product is for. Measured here (2 cores, `./echolab run`, 2026-12-05): the
    # StarPO run went 0.38 -> 0.77 by step 18 and took 8 minutes for its 60 steps.
    return ExperimentSpec(
        name=DEMO_NAME,
        description="StarPO against StarPO-S (variance filter, no KL, asymmetric clipping) on the "
        "two-armed Bandit, with the tiny CPU model. Watch success climb, and in-group reward std fall as "
        "the groups agree.",
        env={"name": "bandit", "params": {}},
        preset="starpo",
        grid={"preset": ["starpo", "starpo-s"]},
        seeds=[0],
        steps=60,
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
