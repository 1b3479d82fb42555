"""Runs for the runs-table tests: in named experiments, with an env and an algorithm in the config."""

from webapp.experiments.models import Experiment, Run


def table_run(user, experiment="Sweep", env="bandit", advantage="ppo", **fields) -> Run:
    experiment, _ = Experiment.objects.get_or_create(owner=user, name=experiment, defaults={"config": {}})
    fields.setdefault("label", "seed=1")
    fields.setdefault(
        "config",
        {"env": {"name": env}, "seed": 1, "algorithm": {"advantage": advantage, "filter_ratio": 0.25}},
    )
    return Run.objects.create(experiment=experiment, **fields)
