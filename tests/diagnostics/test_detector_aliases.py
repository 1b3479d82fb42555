"""Keys logged by RAGEN/veRL and TRL are read as ours."""

import pytest

from diagnostics import Detector, aliases, metrics


@pytest.mark.parametrize(
    "foreign, ours",
    [
        ("rollout/in_group_std", "train/reward_std_in_group"),
        ("frac_reward_zero_std", "train/frac_zero_std_groups"),
        ("actor/entropy_loss", "actor/entropy"),
        ("entropy", "actor/entropy"),
        ("grad_norm", "actor/grad_norm"),
        ("critic/score/mean", "train/reward_mean"),
        ("reward", "train/reward_mean"),
        ("completions/mean_length", "response/tokens_mean"),
        ("response_length/mean", "response/tokens_mean"),
        ("success", "train/success"),
        ("clip_ratio/high_mean", "actor/clip_frac_high"),
        ("clip_ratio/region_mean", "actor/clip_frac"),
        ("kl", "actor/kl_ref"),
        ("actor/pg_clipfrac", "actor/clip_frac"),
        ("actor/ppo_kl", "actor/approx_kl"),
        ("actor/kl_loss", "actor/kl_ref"),
        ("actor/entropy", "actor/entropy"),
        ("actor/grad_norm", "actor/grad_norm"),
    ],
)
def test_known_keys_map_to_ours(foreign, ours):
    assert aliases.canonical({foreign: 1}) == {ours: 1.0}


def test_every_alias_points_at_a_charted_key_or_a_template_collapse_key():
    assert set(aliases.ALIASES.values()) <= set(aliases.KEYS) | {
        key for key in metrics.BY_KEY if key.startswith(metrics.COLLAPSE_PREFIX)
    }


def test_our_key_wins_over_an_alias_in_either_order_and_the_alias_keeps_its_name():
    both = {"actor/grad_norm": 2.0, "grad_norm": 1.0}
    assert aliases.canonical({"grad_norm": 1.0, "actor/grad_norm": 2.0}) == both
    assert aliases.canonical({"actor/grad_norm": 2.0, "grad_norm": 1.0}) == both


def test_of_two_aliases_the_first_takes_our_name_and_nothing_is_lost():
    # TRL's `reward` and veRL's `critic/score/mean` both mean train/reward_mean.
    assert aliases.canonical({"reward": 1.0, "critic/score/mean": 2.0}) == {
        "train/reward_mean": 1.0,
        "critic/score/mean": 2.0,
    }


def test_keys_without_an_equivalent_keep_their_names():
    assert aliases.canonical({"completions/clipped_ratio": 0.5, "clip_ratio/low_mean": 0.1}) == {
        "completions/clipped_ratio": 0.5,
        "clip_ratio/low_mean": 0.1,
    }


def test_trls_reward_std_is_not_read_as_the_in_group_std():
    # TRL's reward_std is over the whole batch: with every group agreeing within itself (every group's std
    # 0, frac_reward_zero_std 1) it stays up as long as the groups differ from one another.
    assert aliases.canonical({"reward_std": 0.5, "frac_reward_zero_std": 1.0}) == {
        "reward_std": 0.5,
        "train/frac_zero_std_groups": 1.0,
    }


def test_none_is_dropped_and_a_string_is_an_error():
    assert aliases.canonical({"entropy": None, "timing_s/gen": 3}) == {"timing_s/gen": 3.0}
    with pytest.raises(ValueError, match="metric 'entropy': 'high' is not a number"):
        aliases.canonical({"entropy": "high"})


def test_detector_reads_aliased_keys():
    det = Detector({"grad_spike": {"min_steps": 3}})
    events = [e for step in range(5) for e in det.update(step, {"grad_norm": 1.0})]
    events += det.update(5, {"train/grad_norm": float("nan")})
    assert [(e["step"], e["rule"]) for e in events] == [(5, "grad_spike")]
