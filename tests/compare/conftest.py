"""Users and runs with configs, metric points and detector events, written straight to the database."""

from trainer.config import TrainConfig
from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint


def make_experiment(owner, name="exp", **fields) -> Experiment:
    return Experiment.objects.create(owner=owner, name=name, config={}, **fields)


def make_run(experiment, label="seed=1", preset="starpo", config=None, **fields) -> Run:
    """A run whose config is a real trainer config: `preset` plus dotted overrides."""
    overrides = dict(config or {})
    cfg = TrainConfig.preset(preset, *[f"{key}={value}" for key, value in overrides.items()]).to_dict()
    fields.setdefault("status", Run.Status.COMPLETED)
    return Run.objects.create(experiment=experiment, label=label, config=cfg, **fields)


def points(run, key, values: dict[int, float]):
    MetricPoint.upsert(run.pk, [(step, key, value) for step, value in values.items()])


def event(run, step, level, rule="reward_std_drop"):
    return DetectorEvent.objects.create(
        run=run, step=step, level=level, rule=rule, message=f"{level} at {step}"
    )
