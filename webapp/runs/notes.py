"""Notes the run page shows next to a chart: facts decided from the run's config, not warnings (no detector
event, no email)."""

from diagnostics import metrics
from trainer.config import ConfigError, TrainConfig
from trainer.filter import most_kept
from webapp.experiments.models import Run


def single_mini_batch_note(config: TrainConfig) -> str:
    """Why actor/clip_frac is 0 on every step, or "" when it can act. With one epoch over one mini-batch the
    policy that trains is the one that sampled, so every ratio is 1 and neither clip bound (nor clip-higher)
    can act; the kept trajectories are at most the filter's most kept groups x group_size."""
    rollout, optim, algorithm = config.rollout, config.optim, config.algorithm
    kept_groups = most_kept(rollout.env_groups, algorithm.filter, algorithm.filter_value)
    most_trajectories = kept_groups * rollout.group_size
    if optim.updates_per_batch != 1 or most_trajectories > optim.mini_batch_size:
        return ""
    kept = (
        f"all {rollout.env_groups} groups"
        if algorithm.filter == "none"
        else f"at most {kept_groups} of {rollout.env_groups} groups kept by the {algorithm.filter} filter"
    )
    return (
        f"Always 0 in this run, by its config: {kept} x {rollout.group_size} = at most "
        f"{most_trajectories} trajectories per step form a single mini-batch "
        f"(optim.mini_batch_size {optim.mini_batch_size}, optim.updates_per_batch 1), so every ratio is 1 "
        f"and clipping, clip-higher included, cannot act. Lower optim.mini_batch_size or raise "
        f"optim.updates_per_batch to let it act."
    )


def chart_notes(run: Run) -> dict[str, str]:
    """Chart id -> the note shown beside that chart; a run trained elsewhere, or whose config this trainer
    no longer reads, gets none."""
    if run.experiment.imported:
        return {}
    try:
        config = TrainConfig.from_dict(run.config)
    except ConfigError:
        return {}
    note = single_mini_batch_note(config)
    return {metrics.CLIP_CHART.id: note} if note else {}
