"""Our metric keys, and the names RAGEN, veRL and TRL log for the same quantities.

The detector only reads our keys. `canonical()` renames the known foreign keys so a metrics file
exported from another trainer can be checked as it is. When a step carries both our key and an alias,
our key wins: it is the one our trainer wrote on purpose.
"""

import math
from collections.abc import Mapping
from typing import Any

# Our keys that the detector or the run page's charts read, with what each one means (docs/METRICS.md has
# the full list the trainer writes).
KEYS = {
    "train/success": "fraction of training trajectories that reached the goal",
    "train/reward_mean": "mean trajectory reward on training rollouts",
    "train/reward_std_in_group": "mean over groups of the std of rewards within a group",
    "train/frac_zero_std_groups": "fraction of groups whose rewards all agree (no learning signal)",
    "actor/entropy": "mean token entropy of the policy on its own replies",
    "actor/grad_norm": "actor gradient norm before clipping",
    "actor/clip_frac": "fraction of tokens where the clipped PPO term was active",
    "actor/clip_frac_high": "fraction of tokens with a positive advantage clipped at 1 + eps_high",
    "actor/approx_kl": "drift from the rollout policy: mean (logp_old - logp)",
    "actor/kl_ref": "KL estimate to the reference policy",
    "response/think_tokens_mean": "mean number of tokens inside <think> per reply",
    "response/tokens_mean": "mean number of tokens per reply",
    "val/success": "success on the fixed validation seeds",
}

# Foreign key -> our key. TRL logs to W&B with a "train/" prefix and to MLflow without, so both spellings
# are listed. veRL's actor/entropy and actor/grad_norm are already ours. Keys without an equivalent (TRL's
# completions/clipped_ratio, clip_ratio/low_mean, veRL's timing_s/*) pass through under their own names.
ALIASES = {
    # RAGEN / veRL
    "rollout/in_group_std": "train/reward_std_in_group",
    "actor/entropy_loss": "actor/entropy",  # older veRL logs the (positive) entropy under this name
    "critic/score/mean": "train/reward_mean",
    "response_length/mean": "response/tokens_mean",
    "actor/pg_clipfrac": "actor/clip_frac",
    "actor/ppo_kl": "actor/approx_kl",
    "actor/kl_loss": "actor/kl_ref",
    # TRL (GRPOTrainer)
    "reward_std": "train/reward_std_in_group",  # TRL averages the per-group std: an in-group std
    "train/reward_std": "train/reward_std_in_group",
    "frac_reward_zero_std": "train/frac_zero_std_groups",
    "train/frac_reward_zero_std": "train/frac_zero_std_groups",
    "entropy": "actor/entropy",
    "train/entropy": "actor/entropy",
    "grad_norm": "actor/grad_norm",
    "train/grad_norm": "actor/grad_norm",
    "reward": "train/reward_mean",
    "train/reward": "train/reward_mean",
    "completions/mean_length": "response/tokens_mean",
    "train/completions/mean_length": "response/tokens_mean",
    "clip_ratio/region_mean": "actor/clip_frac",  # tokens clipped at either bound
    "train/clip_ratio/region_mean": "actor/clip_frac",
    "clip_ratio/high_mean": "actor/clip_frac_high",
    "train/clip_ratio/high_mean": "actor/clip_frac_high",
    "kl": "actor/kl_ref",
    "train/kl": "actor/kl_ref",
    # generic success names
    "success": "train/success",
    "success_rate": "train/success",
    "train/success_rate": "train/success",
    "val/success_rate": "val/success",
}


def canonical(metrics: Mapping[str, Any]) -> dict[str, float]:
    """Return `metrics` keyed by our names, values as floats; None means "not logged" and is dropped.

    Unknown keys pass through unchanged (the detector ignores them). A value that is not a number
    raises ValueError naming the key: a worker that sends strings has a bug worth seeing.
    """
    renamed: dict[str, float] = {}
    for key, value in metrics.items():
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"metric {key!r}: {value!r} is not a number")
        ours = ALIASES.get(key, key)
        if ours in renamed and key != ours:
            continue  # our own key already set this one
        renamed[ours] = float(value)
    return renamed


def finite(value: float | None) -> float | None:
    """The value if it is a finite number, else None: most rules treat NaN/inf as no data."""
    return value if value is not None and math.isfinite(value) else None
