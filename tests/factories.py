"""Test objects written straight to the database: users, experiments, runs, metric points, detector events,
and the tiny trainer config. One home, so that a change to a model touches one place in the tests."""

from django.contrib.auth import get_user_model
from django.db import connection
from django.utils import timezone

from webapp.alerts.models import DetectorEvent
from webapp.experiments.models import Experiment, Run
from webapp.metrics.models import MetricPoint, MetricRollup

# What a run's config holds when a test does not care: enough for the run page's config panel and rerun.
RUN_CONFIG = {"model": {"name": "tiny"}, "rollout": {"group_size": 4}}


def make_user(username="alice", password=None, email=None):
    email = f"{username}@example.com" if email is None else email
    return get_user_model().objects.create_user(username, email, password or f"{username}-password-1")


def make_model_folder(path):
    """A folder that looks like save_pretrained's output (config.json and a tokenizer file), without weights:
    enough for the web app's checks, which never load a model."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text("{}")
    (path / "tokenizer_config.json").write_text("{}")
    return path


def make_experiment(owner, name=None, config=None, **fields) -> Experiment:
    name = f"{owner.username}'s experiment" if name is None else name
    return Experiment.objects.create(owner=owner, name=name, config=config or {}, **fields)


def make_run(owner, *, experiment=None, label="seed=1", config=None, **fields) -> Run:
    """A run (queued unless `status` says otherwise) in `experiment`, or in a new experiment of `owner`'s."""
    experiment = experiment or make_experiment(owner)
    config = RUN_CONFIG if config is None else config
    return Run.objects.create(experiment=experiment, label=label, config=config, **fields)


def streamed_run(owner, **fields) -> Run:
    """A run trained elsewhere and being logged, as an MLflow client's is: running, in an imported
    experiment (the only runs POST /api/runs/<id>/metrics takes points for)."""
    fields.setdefault("status", Run.Status.RUNNING)
    return make_run(owner, experiment=make_experiment(owner, imported=True), config={}, **fields)


def trainer_config(preset="starpo", overrides=None) -> dict:
    """A real trainer config: `preset` plus dotted overrides such as {"optim.actor_lr": 1e-4}."""
    from trainer.config import TrainConfig

    return TrainConfig.preset(
        preset, *[f"{key}={value}" for key, value in (overrides or {}).items()]
    ).to_dict()


def trained_run(experiment, label="seed=1", preset="starpo", overrides=None, **fields) -> Run:
    """A completed run whose config is a real trainer config, as the compare pages read them."""
    fields.setdefault("status", Run.Status.COMPLETED)
    config = trainer_config(preset, overrides)
    return make_run(experiment.owner, experiment=experiment, label=label, config=config, **fields)


def table_run(user, experiment="Sweep", env="bandit", advantage="ppo", **fields) -> Run:
    """A run for the runs table: in the named experiment (shared by name), with an env and an algorithm."""
    experiment, _ = Experiment.objects.get_or_create(owner=user, name=experiment, defaults={"config": {}})
    fields.setdefault(
        "config",
        {"env": {"name": env}, "seed": 1, "algorithm": {"advantage": advantage, "filter_ratio": 0.25}},
    )
    return make_run(user, experiment=experiment, **fields)


def spec_experiment(owner, name="FrozenLake test", **fields) -> Experiment:
    """An experiment with its runs, made as the form and the API make one (seeds=[1, 2], grid={...})."""
    from webapp.experiments.specs import ExperimentSpec

    fields.setdefault("env", {"name": "frozenlake", "params": {"size": 4}})
    fields.setdefault("steps", 5)
    return Experiment.create_with_runs(owner, ExperimentSpec(name=name, **fields))


def tiny_config(model_dir, steps=4, **schedule) -> dict:
    """A config whose steps take about a second on one CPU core; a checkpoint after every step. No
    template-collapse measurement: the worker tests count every step's points as steps x keys, and the
    periodic collapse/* keys are tested in tests/trainer/test_collapse.py."""
    from trainer.config import TrainConfig

    return TrainConfig.preset(
        "grpo",
        model={"name": str(model_dir)},
        rollout={"env_groups": 2, "group_size": 2, "max_new_tokens": 8, "max_turns": 1, "val_seeds": 2},
        optim={"mini_batch_size": 4, "micro_batch_size": 4},
        schedule={
            "steps": steps,
            "val_every": 0,
            "checkpoint_every": 1,
            "keep_checkpoints": 2,
            "samples_per_step": 2,
            **schedule,
        },
        diagnostics={"collapse_every": 0},
    ).to_dict()


def points(run, key, values: dict[int, float]):
    """Write {step: value} of `key` through the model, as ingest does."""
    MetricPoint.upsert(run.pk, [(step, key, value) for step, value in values.items()])


def insert_series(run, key, steps: int, expression="sin(s / 100.0)"):
    """steps points (0..steps-1) of `key`, value = a SQL expression of s, written in one statement."""
    with connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {MetricPoint._meta.db_table} (run_id, key, step, value) "
            f"SELECT %s, %s, s, {expression} FROM generate_series(0, %s) AS s",
            [run.pk, key, steps - 1],
        )
    MetricRollup.refresh(run.pk)  # as MetricPoint.upsert does for points written through it


def make_event(run, step, level, rule="reward_std_drop", message=None, **fields) -> DetectorEvent:
    message = f"{level} at {step}" if message is None else message
    return DetectorEvent.objects.create(run=run, step=step, level=level, rule=rule, message=message, **fields)


def run_with_data(owner, *, experiment=None, label="seed=1", **fields) -> Run:
    """A completed run (unless `status` says otherwise) holding a row in every table of a run's data: metric
    points with their rollups and latest_metrics, a step record, a sample, detector events, an alert email
    that tells two of them and one that tells a failure. Its rows are counted by `rows_of`."""
    from webapp.alerts.models import Notification
    from webapp.metrics.models import Sample, StepRecord

    fields.setdefault("status", Run.Status.COMPLETED)
    run = make_run(owner, experiment=experiment, label=label, **fields)
    points(run, "train/success", {step: step / 300 for step in range(300)})
    Run.objects.filter(pk=run.pk).update(latest_metrics={"train/success": 299 / 300})
    StepRecord.objects.create(run=run, step=5, key="train/reward_std_hist", values=[0.1, 0.2])
    Sample.objects.create(run=run, step=5, index=0, data={"turns": []})
    collapse = make_event(run, 200, "collapse", rule="success_collapse")
    warning = make_event(run, 200, "warning")
    make_event(run, 250, "resolved")
    notification = Notification.objects.create(run=run, event=collapse, recipients=[owner.email])
    notification.also.set([warning])
    Notification.objects.create(
        run=run,
        failure="lost",
        failure_step=250,
        recipients=[owner.email],
        status=Notification.Status.SENT,
        sent_at=timezone.now(),
    )
    return run


def rows_of(run) -> dict[str, int]:
    """How many rows of each table of a run's data hold `run`'s."""
    from webapp.alerts.models import Notification
    from webapp.metrics.models import Sample, StepRecord

    links = Notification.also.through.objects
    return {
        "runs": Run.objects.filter(pk=run.pk).count(),
        "points": MetricPoint.objects.filter(run_id=run.pk).count(),
        "rollups": MetricRollup.objects.filter(run_id=run.pk).count(),
        "step_records": StepRecord.objects.filter(run_id=run.pk).count(),
        "samples": Sample.objects.filter(run_id=run.pk).count(),
        "events": DetectorEvent.objects.filter(run_id=run.pk).count(),
        "notifications": Notification.objects.filter(run_id=run.pk).count(),
        "notification_links": links.filter(detectorevent__run_id=run.pk).count(),
    }


def make_checkpoint(run, step: int) -> None:
    """A checkpoint of `run` on disk to resume at `step`, as trainer.checkpoint lays one out (its files bar
    state.json left out: only the web app's view of it is tested with this)."""
    folder = run.checkpoint_dir / "checkpoints" / f"step_{step:06d}"
    folder.mkdir(parents=True)
    (folder / "state.json").write_text(f'{{"step": {step}}}')
