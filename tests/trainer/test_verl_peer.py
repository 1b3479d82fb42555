"""Peer test: the trainer's math against veRL's own functions (verl/trainer/ppo/core_algos.py and
verl/utils/torch_functional.py, which RAGEN trains with), on seeded random tensors.

veRL is installed from requirements-peer.txt (./echolab test does it, --no-deps). Every case maps our
inputs onto veRL's signature explicitly and compares on the model's tokens (mask 1): off the mask veRL
leaves values we zero. Where the two differ on purpose, the test pins the difference and says why
(docs/TRAINER.md, "Reference vs ours").
"""

import importlib.util
import sys
import types
from types import SimpleNamespace

import pytest
import torch
from omegaconf import OmegaConf
from torch.testing import assert_close

from trainer import advantages as A
from trainer import losses
from trainer.loop import token_logprobs


def import_verl_math():
    """veRL's core_algos and torch_functional, imported without verl/__init__.py and verl.workers.config:
    both pull in ray (DataProto; the profiler's single controller), which the math never touches and which
    the peer install leaves out. core_algos names ActorConfig only in type hints and in isinstance checks of
    loss functions we do not call, so a placeholder class stands in for it."""
    spec = importlib.util.find_spec("verl")
    if spec is None:
        raise ImportError("veRL is missing: ./echolab test installs requirements-peer.txt")
    package = types.ModuleType("verl")
    package.__path__ = list(spec.submodule_search_locations)
    workers_config = types.ModuleType("verl.workers.config")
    workers_config.ActorConfig = type("ActorConfig", (), {})
    sys.modules.setdefault("verl", package)
    sys.modules.setdefault("verl.workers.config", workers_config)
    import verl.trainer.ppo.core_algos as core_algos
    import verl.utils.torch_functional as torch_functional

    return core_algos, torch_functional


core_algos, verl_F = import_verl_math()

SHAPES = [(1, 7), (4, 9), (16, 33), (7, 64)]
SEEDS = [0, 1, 2]
AGG_MODES = ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum"]


def masks_with_gaps(rows: int, width: int, gen: torch.Generator) -> torch.Tensor:
    """0/1 masks as a multi-turn batch has them: a row starts late (its prompt), ends early (padding) and has
    observation tokens between its turns. Row 0 is all model tokens, row 1 (when there is one) a single one."""

    def draw(low: int, high: int) -> int:
        return int(torch.randint(low, high, (1,), generator=gen))

    mask = torch.zeros(rows, width)
    for row in range(rows):
        start = draw(0, width // 4 + 1)
        end = draw(start + 1, width + 1)
        mask[row, start:end] = 1
        for _ in range(draw(0, 4)):  # observation gaps
            gap = draw(start, end)
            mask[row, gap : gap + draw(1, 5)] = 0
        mask[row, end - 1] = 1
    mask[0] = 1
    if rows > 1:
        mask[1] = 0
        mask[1, draw(0, width)] = 1
    return mask


def on_mask(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    return x[mask.bool()]


def seeded_mask(shape, seed):
    gen = torch.Generator().manual_seed(seed)
    mask = masks_with_gaps(*shape, gen)
    return gen, mask


# --- advantages -------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("gamma, lam", [(1.0, 1.0), (0.99, 0.95), (0.5, 0.8)])
def test_gae_and_whitening_match_verl(shape, seed, gamma, lam):
    """veRL's compute_gae_advantage_return whitens inside; the loop runs gae per micro-batch, then whiten
    over all of them. Rewards sit on every token, observation tokens too: both ignore those."""
    gen, mask = seeded_mask(shape, seed)
    rewards = torch.randn(shape, generator=gen)
    values = torch.randn(shape, generator=gen)
    verl_adv, verl_returns = core_algos.compute_gae_advantage_return(rewards, values, mask, gamma, lam)

    micro = [slice(0, 1), slice(1, None)]  # the first row alone, the rest together
    ours = [A.gae(rewards[rows], values[rows], mask[rows], gamma, lam) for rows in micro]
    whitened = A.whiten([adv for adv, _ in ours], [mask[rows] for rows in micro])
    assert_close(torch.cat(whitened), torch.where(mask.bool(), verl_adv, 0.0))
    returns = torch.cat([ret for _, ret in ours])
    assert_close(on_mask(returns, mask), on_mask(verl_returns, mask))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_whiten_matches_masked_whiten(shape, seed):
    gen, mask = seeded_mask(shape, seed)
    values = 3.0 + 2.0 * torch.randn(shape, generator=gen)
    [ours] = A.whiten([values], [mask])
    assert_close(on_mask(ours, mask), on_mask(verl_F.masked_whiten(values, mask), mask))


def test_whiten_of_nearly_equal_advantages_matches_masked_whiten():
    """Advantages equal but for float rounding (a critic that predicts every return): veRL scales by
    rsqrt(var + 1e-8), which leaves rounding-sized differences rounding-sized."""
    mask = torch.ones(2, 8)
    values = 0.1 + 1e-7 * torch.randn(2, 8, generator=torch.Generator().manual_seed(0))
    [ours] = A.whiten([values], [mask])
    assert_close(ours, verl_F.masked_whiten(values, mask))
    assert ours.abs().max() < 1e-2


def test_whiten_of_one_token_is_left_as_it_is_where_verl_raises():
    """Pinned difference: veRL refuses to whiten a single token (its unbiased variance divides by zero); we
    leave it unwhitened so that a batch with one model token still trains."""
    mask = torch.tensor([[0.0, 1.0, 0.0]])
    values = torch.tensor([[5.0, 2.0, 7.0]])
    with pytest.raises(ValueError):
        verl_F.masked_whiten(values, mask)
    [ours] = A.whiten([values], [mask])
    assert ours.tolist() == [[0.0, 2.0, 0.0]]


def grouped_rewards(sizes: list[int], gen: torch.Generator, continuous: bool):
    """Trajectory rewards in groups of `sizes`, rows of a group interleaved with other groups' rows. Group 0
    has identical rewards; discrete rewards (format penalty, 0, partial, success) make ties."""
    groups = torch.repeat_interleave(torch.arange(len(sizes)), torch.tensor(sizes))
    groups = groups[torch.randperm(len(groups), generator=gen)]
    if continuous:
        rewards = torch.rand(len(groups), generator=gen)
    else:
        levels = torch.tensor([-0.1, 0.0, 0.1, 1.0])
        rewards = levels[torch.randint(0, 4, (len(groups),), generator=gen)]
    rewards[groups == 0] = 0.1
    return rewards, groups


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("continuous", [False, True])
@pytest.mark.parametrize("mode, norm_by_std", [("grpo", True), ("drgrpo", False)])
def test_group_advantages_match_grpo_outcome_advantage(seed, continuous, mode, norm_by_std):
    gen = torch.Generator().manual_seed(seed)
    rewards, groups = grouped_rewards([3, 2, 5, 16, 4], gen, continuous)
    mask = masks_with_gaps(len(rewards), 12, gen)
    # veRL reads a trajectory's reward as the sum of its token rewards: ours put it on the last model token
    token_level = A.token_rewards(rewards, mask)
    verl_adv, _ = core_algos.compute_grpo_outcome_advantage(
        token_level, mask, groups.numpy(), epsilon=1e-6, norm_adv_by_std_in_grpo=norm_by_std
    )
    ours = A.group_advantages(rewards, groups, mode).unsqueeze(1) * mask  # as Trainer.group_advantages
    assert_close(ours, verl_adv)
    assert not ours[groups == 0].any()  # identical rewards: no advantage


def test_a_group_of_one_gets_zero_where_verl_keeps_its_reward():
    """Pinned difference: veRL gives a lone trajectory mean 0 and std 1, so its raw reward is its advantage;
    ours centres it on itself (0), as any group without reward spread. Unreachable in training: the config
    asks group_size >= 2 for GRPO, and the filter keeps or drops whole groups."""
    rewards, groups = torch.tensor([0.7, 1.0, 0.0]), torch.tensor([0, 1, 1])
    mask = torch.ones(3, 2)
    verl_adv, _ = core_algos.compute_grpo_outcome_advantage(
        A.token_rewards(rewards, mask), mask, groups.numpy()
    )
    ours = A.group_advantages(rewards, groups, "grpo").unsqueeze(1) * mask
    assert_close(ours[1:], verl_adv[1:])
    assert_close(verl_adv[0], torch.full((2,), 0.7 / (1 + 1e-6)))
    assert ours[0].tolist() == [0.0, 0.0]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
def test_kl_reward_penalty_matches_compute_rewards(shape, seed):
    """PPO's token rewards: R on the last model token minus beta * k1 (veRL's compute_rewards, the KL
    reward penalty's k1 form)."""
    gen, mask = seeded_mask(shape, seed)
    old_logp, ref_logp = -torch.rand(shape, generator=gen) * 3, -torch.rand(shape, generator=gen) * 3
    final = torch.randn(shape[0], generator=gen)
    kl = losses.kl_penalty(old_logp, ref_logp, "k1") * mask
    ours = A.token_rewards(final, mask, kl, kl_coef=0.05)
    scores = A.token_rewards(final, mask)
    verl = core_algos.compute_rewards(scores, old_logp, ref_logp, 0.05)
    assert_close(on_mask(ours, mask), on_mask(verl, mask))


# --- losses -----------------------------------------------------------------------------------------------


def policy_case(shape, seed, spread: float = 0.5):
    """Log-probs whose ratios fall on both sides of the clip range, advantages of both signs and some zeros."""
    gen, mask = seeded_mask(shape, seed)
    old_logp = -torch.rand(shape, generator=gen) * 4
    logp = old_logp + spread * torch.randn(shape, generator=gen)
    adv = torch.randn(shape, generator=gen)
    adv[torch.rand(shape, generator=gen) < 0.1] = 0.0
    return logp, old_logp, adv, mask


def verl_policy_loss(logp, old_logp, adv, mask, eps_low, eps_high, dual_clip, mode, global_batch_info=None):
    """compute_policy_loss_vanilla with an actor config built from our settings. veRL's dual clip is always
    on (clip_ratio_c > 1); an infinite c never binds, which is our dual_clip = 0."""
    config = OmegaConf.create(
        {
            "clip_ratio": eps_low,
            "clip_ratio_low": eps_low,
            "clip_ratio_high": eps_high,
            "clip_ratio_c": dual_clip if dual_clip > 0 else float("inf"),
            "global_batch_info": global_batch_info or {},
        }
    )
    return core_algos.compute_policy_loss_vanilla(
        old_logp, logp, adv, mask, loss_agg_mode=mode, config=config
    )


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", AGG_MODES)
@pytest.mark.parametrize("eps_low, eps_high", [(0.2, 0.2), (0.2, 0.28)])
@pytest.mark.parametrize("dual_clip", [3.0, 0.0])
def test_policy_loss_matches_compute_policy_loss_vanilla(shape, seed, mode, eps_low, eps_high, dual_clip):
    logp, old_logp, adv, mask = policy_case(shape, seed)
    ours, stats = losses.policy_loss(logp, old_logp, adv, mask, eps_low, eps_high, dual_clip, mode)
    verl, metrics = verl_policy_loss(logp, old_logp, adv, mask, eps_low, eps_high, dual_clip, mode)
    assert_close(ours, verl)
    assert stats["clip_frac"] == pytest.approx(metrics["actor/pg_clipfrac"], abs=1e-6)
    assert stats["approx_kl"] == pytest.approx(metrics["actor/ppo_kl"], abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dual_clip", [3.0, 0.0])
def test_policy_loss_matches_verl_at_extreme_ratios(seed, dual_clip):
    """Log-ratios up to +-100 (a token the policy all but dropped, or picked up from nothing): veRL clamps the
    log-ratio to +-20 before exp, so a ratio never overflows and a zero advantage never meets an infinite
    ratio (0 * inf = NaN)."""
    logp, old_logp, adv, mask = policy_case((8, 16), seed, spread=40.0)
    ours, stats = losses.policy_loss(logp, old_logp, adv, mask, 0.2, 0.28, dual_clip, "token-mean")
    verl, metrics = verl_policy_loss(logp, old_logp, adv, mask, 0.2, 0.28, dual_clip, "token-mean")
    assert torch.isfinite(ours)
    assert_close(ours, verl)
    assert stats["approx_kl"] == pytest.approx(metrics["actor/ppo_kl"], rel=1e-5)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", AGG_MODES)
def test_micro_batch_losses_add_up_to_verls_mini_batch_loss(seed, mode):
    """The loop divides each micro-batch by the mini-batch's totals (trajectories, model tokens), as veRL's
    global_batch_info; the micro-batches' losses then add up to the whole mini-batch's. One row has no model
    token at all: it still counts as a trajectory of the mini-batch (veRL's global_batch_size is the
    mini-batch size too)."""
    logp, old_logp, adv, mask = policy_case((12, 20), seed)
    mask[5] = 0
    totals = {"n_seqs": 12, "n_tokens": mask.sum().item()}
    verl_totals = {"global_batch_size": 12, "batch_num_tokens": mask.sum().item()}
    micro = [slice(0, 4), slice(4, 8), slice(8, 12)]
    ours = sum(
        losses.policy_loss(logp[r], old_logp[r], adv[r], mask[r], 0.2, 0.28, 3.0, mode, **totals)[0]
        for r in micro
    )
    verl = sum(
        verl_policy_loss(logp[r], old_logp[r], adv[r], mask[r], 0.2, 0.28, 3.0, mode, verl_totals)[0]
        for r in micro
    )
    whole, _ = verl_policy_loss(logp, old_logp, adv, mask, 0.2, 0.28, 3.0, mode, verl_totals)
    assert_close(ours, verl)
    assert_close(ours, whole)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("mode", AGG_MODES)
def test_aggregate_matches_agg_loss(shape, seed, mode):
    gen, mask = seeded_mask(shape, seed)
    x = torch.randn(shape, generator=gen)
    assert_close(losses.aggregate(x, mask, mode), core_algos.agg_loss(x, mask, mode))


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("clip", [0.5, 0.2])
def test_value_loss_matches_compute_value_loss(shape, seed, clip):
    """The critic's clipped loss, token-mean over the mini-batch's model tokens (our only critic mode)."""
    gen, mask = seeded_mask(shape, seed)
    old_values = torch.randn(shape, generator=gen)
    values = old_values + torch.randn(shape, generator=gen)  # many beyond +-clip of the old values
    returns = torch.randn(shape, generator=gen)
    n_tokens = mask.sum().item() + 5  # as a micro-batch of a larger mini-batch
    ours = losses.value_loss(values, old_values, returns, mask, clip, n_tokens=n_tokens)
    verl, _ = core_algos.compute_value_loss(
        values, returns, old_values, mask, clip, loss_agg_mode="token-mean", batch_num_tokens=n_tokens
    )
    assert_close(ours, verl)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ours_name, verl_names", [("k1", ["kl", "k1"]), ("k3", ["low_var_kl", "k3"])])
def test_kl_estimators_match_kl_penalty(seed, ours_name, verl_names):
    """Log-ratios from -30 to 30: past veRL's clamps (k3's log-ratio to +-20, its value to +-10) too."""
    gen = torch.Generator().manual_seed(seed)
    ref_logp = -torch.rand(64, generator=gen) * 5
    logp = ref_logp + torch.cat([torch.randn(32, generator=gen), torch.linspace(-30, 30, 32)])
    ours = losses.kl_penalty(logp, ref_logp, ours_name)
    for name in verl_names:
        assert_close(ours, core_algos.kl_penalty(logp, ref_logp, name))


# --- log-probs and entropy ---------------------------------------------------------------------------------


class FixedLogits:
    """A stand-in causal LM whose forward returns the given logits. Its layers are said not to attend to the
    whole sequence, so prefix.forward calls it once, plainly, with no KV cache."""

    config = SimpleNamespace(layer_types=["sliding_attention"])

    def __init__(self, logits: torch.Tensor):
        self.logits = logits

    def __call__(self, **_):
        return SimpleNamespace(logits=self.logits)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("temperature", [1.0, 0.7])
@pytest.mark.parametrize("mode", AGG_MODES)
def test_logprobs_and_entropy_match_verl(shape, seed, temperature, mode):
    """token_logprobs against veRL's logprobs_from_logits and entropy_from_logits on logits / temperature
    (veRL's actor divides by the rollout temperature first), and the entropy bonus against
    compute_entropy_loss."""
    gen = torch.Generator().manual_seed(seed)
    rows, width = shape
    vocab = 50
    ids = torch.randint(0, vocab, (rows, width + 1), generator=gen)
    logits = 3 * torch.randn(rows, width + 1, vocab, generator=gen)
    resp = masks_with_gaps(rows, width, gen)  # ids[:, 1:] the model sampled
    logp, entropy = token_logprobs(
        FixedLogits(logits), ids, torch.ones_like(ids), resp, temperature, with_entropy=True
    )
    scaled = logits[:, :-1] / temperature
    assert_close(on_mask(logp, resp), on_mask(verl_F.logprobs_from_logits(scaled, ids[:, 1:]), resp))
    assert_close(on_mask(entropy, resp), on_mask(verl_F.entropy_from_logits(scaled), resp))
    assert_close(
        losses.aggregate(entropy, resp, mode),
        core_algos.compute_entropy_loss(scaled, resp, loss_agg_mode=mode),
    )
