"""The training loop: StarPO and StarPO-S (RAGEN, arXiv 2504.20073), one update per rollout batch.

This docstring is the objective, written once; the files it names hold each piece.

A step plays P groups of N trajectories (rollout.py): tokens y_t, a 0/1 mask of the model's own tokens
(every sum and mean below runs over those tokens only), and a raw trajectory reward R (environment rewards
plus format penalties). StarPO-S first keeps only the groups whose R vary most (filter.py, top_ratio 0.25 of
the groups by in-group std) -- before any advantage is computed, so the group statistics below are those of
the kept groups. `Trainer.update` then trains on what is kept, in four steps:

1. Score, once per batch, without gradients: log pi_old(y_t), log pi_ref(y_t) (when kl_coef > 0) and, for
   PPO, the critic's V_old(s_t). Log-probs are of logits / rollout temperature, as veRL.
2. Advantages (advantages.py). KL_t is the estimator algorithm.kl_estimator of KL(pi || pi_ref) (losses.py:
   k1 = log pi - log pi_ref, k3 = pi_ref/pi - 1 - log(pi_ref/pi)); beta = kl_coef.
     PPO:  r_t = R on the trajectory's last model token - beta * KL_t(pi_old)   (the KL is in the reward);
           A_t, G_t = GAE(r, V_old; gamma, lam) over model tokens (observation tokens are jumped, not
           zeroed), A_t whitened over all model tokens of the batch (advantages.whiten; on by
           default, algorithm.whiten_advantages).
     GRPO: A_t = (R - mean_g R) / (std_g R + 1e-6) on every token of the trajectory, group g's unbiased
           std; Dr. GRPO: A_t = R - mean_g R.
3. Optimise: `optim.updates_per_batch` epochs; each cuts a shuffled order of micro-batches
   (`micro_batch_size` consecutive trajectories) into mini-batches of `mini_batch_size` trajectories (a
   multiple, the config checks) and takes one AdamW step per mini-batch for the actor and one for the
   critic (gradients accumulated over its micro-batches, clipped to grad_clip; a non-finite norm skips
   the step, counted in actor/ and critic/skipped_steps), minimising
     L_actor  = agg( max(-A_t rho_t, -A_t clip(rho_t, 1 - eps_low, 1 + eps_high)) )   (losses.policy_loss)
                - entropy_coef * agg(H_t)
                + beta * agg(KL_t(pi))                                                (GRPO only)
     L_critic = token-mean 0.5 * max((V - G)^2, (V_old + clip(V - V_old, -value_clip, value_clip) - G)^2)
                                                                                      (PPO only)
   with rho_t = pi(y_t) / pi_old(y_t), H_t the policy's entropy at t, and dual-clip: for A_t < 0 a
   token's policy term is at most -dual_clip * A_t. agg is algorithm.loss_agg over the mini-batch
   (seq-mean-token-mean, token-mean or seq-mean-token-sum; losses.aggregate divides by mini-batch totals,
   so the micro-batches' losses add up to the mini-batch's). StarPO clips at 0.2/0.2 with beta 0.001;
   StarPO-S at 0.2/0.28 (clip-higher) with beta 0. The first mini-batch of the first epoch trains before
   any step, so pi_old is its own training forward, detached (unless PPO's KL reward needs it earlier).
4. Summarise: the actor/ and critic/ metrics of docs/METRICS.md.
"""

from __future__ import annotations

import math
import os
import random
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from diagnostics.metrics import (
    ACTOR_APPROX_KL,
    ACTOR_CLIP_FRAC,
    ACTOR_CLIP_FRAC_HIGH,
    ACTOR_ENTROPY,
    ACTOR_ENTROPY_ADV_COV,
    ACTOR_GRAD_NORM,
    ACTOR_KL_REF,
    ACTOR_PG_LOSS,
    ACTOR_SKIPPED_STEPS,
    BY_KEY,
    CRITIC_EXPLAINED_VAR,
    CRITIC_GRAD_NORM,
    CRITIC_SKIPPED_STEPS,
    CRITIC_VF_LOSS,
    PERF_TOKENS_PER_S,
    RESPONSE_THINK_TOKENS_MEAN,
    RESPONSE_TOKENS_MEAN,
    TIME_COLLAPSE_S,
    TIME_ROLLOUT_S,
    TIME_STEP_S,
    TIME_UPDATE_S,
    TRAIN_ACTIONS_VALID,
    TRAIN_FILTER_KEPT_RATIO,
    TRAIN_FILTER_SKIPPED,
    TRAIN_FILTER_ZERO_GROUPS,
    TRAIN_FORMAT_VALID,
    TRAIN_FRAC_ZERO_STD_GROUPS,
    TRAIN_REWARD_MEAN,
    TRAIN_REWARD_STD_HIST,
    TRAIN_REWARD_STD_IN_GROUP,
    TRAIN_SUCCESS,
    VAL_ENV_SUCCESS,
    VAL_SUCCESS,
)
from trainer import advantages, checkpoint, losses, memory, prefix
from trainer.collapse import CollapseProbe
from trainer.config import TrainConfig
from trainer.filter import group_scores, keep_groups, zero_groups
from trainer.models import Policy, load_policy
from trainer.rollout import ChatFormat, Trajectory, rollout
from trainer.sink import Sink

TRAIN_SEED_BASE = 10_000  # training seeds: TRAIN_SEED_BASE + seed * 10^7 + counter
VAL_SEED_BASE = 0  # validation seeds: 0 .. val_seeds-1, fixed
# losses.policy_loss's per-token statistics -> the actor/ metrics that report their means
CLIP_STATS = {
    ACTOR_CLIP_FRAC: "clip_frac",
    ACTOR_CLIP_FRAC_HIGH: "clip_frac_high",
    ACTOR_APPROX_KL: "approx_kl",
}


class FilterStarved(RuntimeError):
    """The rollout filter kept no group for algorithm.filter_empty_stop_steps steps in a row (as RAGEN-2)."""


def set_determinism(cfg: TrainConfig) -> None:
    reseed(cfg)
    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False


def reseed(cfg: TrainConfig) -> None:
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)


def pad_batch(
    trajs: list[Trajectory], pad_id: int, device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, attention, resp): right padded; resp (B, T-1) marks the model's tokens ids[:, 1:]."""
    width = max(len(t.ids) for t in trajs)
    ids = torch.full((len(trajs), width), pad_id, dtype=torch.long)
    attention = torch.zeros((len(trajs), width), dtype=torch.long)
    mask = torch.zeros((len(trajs), width), dtype=torch.float32)
    for i, t in enumerate(trajs):
        ids[i, : len(t.ids)] = torch.tensor(t.ids)
        attention[i, : len(t.ids)] = 1
        mask[i, : len(t.ids)] = torch.tensor(t.mask, dtype=torch.float32)
    return ids.to(device), attention.to(device), mask[:, 1:].to(device)


def token_logprobs(model, ids, attention, resp, temperature: float, with_entropy: bool = False):
    """log pi(token_t | prefix) for t >= 1 as (B, T-1); only the model's tokens are computed, others 0.
    with_entropy: also the entropy of pi at those tokens (else None)."""
    logits = prefix.forward(model, ids, attention, lambda out: out.logits)[:, :-1]
    selected = resp.bool()
    chosen = logits[selected].float()
    if temperature > 0:
        chosen = chosen / temperature
    logp_all = torch.log_softmax(chosen, dim=-1)
    logp = torch.zeros(resp.shape, device=ids.device, dtype=torch.float32)
    logp[selected] = logp_all.gather(-1, ids[:, 1:][selected].unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return logp, None
    entropy = torch.zeros_like(logp)
    entropy[selected] = -(logp_all.exp() * logp_all).sum(-1)
    return logp, entropy


def critic_values(critic, ids, attention) -> torch.Tensor:
    """V(prefix) before each token t >= 1, as (B, T-1)."""
    return critic(ids, attention)[:, :-1]


def optimizer_step(params: list[torch.nn.Parameter], optimizer, max_norm: float) -> tuple[float, bool]:
    """Clip and step; a non-finite gradient norm skips the step. Returns (grad_norm, skipped)."""
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm).item()
    if not math.isfinite(norm):
        optimizer.zero_grad(set_to_none=True)
        return norm, True
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return norm, False


def _mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs) if xs else 0.0


def _finite_mean(norms: list[float]) -> float:
    """Mean gradient norm over the optimizer steps taken; NaN when every one was skipped."""
    finite = [x for x in norms if math.isfinite(x)]
    return _mean(finite) if finite else float("nan")


def in_group_std(rewards: torch.Tensor) -> torch.Tensor:
    """(P, N) raw trajectory rewards -> (P,) each group's unbiased std (the filter's score); 0 for groups of
    one, which have no spread."""
    return group_scores(rewards) if rewards.shape[1] > 1 else torch.zeros(rewards.shape[0])


def rollout_metrics(trajs: list[Trajectory], rewards: torch.Tensor) -> dict[str, float]:
    """rewards: (P, N) raw trajectory rewards."""
    std = in_group_std(rewards)
    turns = [turn for t in trajs for turn in t.turns]
    return {
        TRAIN_SUCCESS: _mean(float(t.success) for t in trajs),
        TRAIN_REWARD_MEAN: rewards.mean().item(),
        TRAIN_REWARD_STD_IN_GROUP: std.mean().item(),
        TRAIN_FRAC_ZERO_STD_GROUPS: (std < 1e-6).float().mean().item(),
        TRAIN_FORMAT_VALID: _mean(t.format_ok / max(len(t.turns), 1) for t in trajs) if turns else 0.0,
        TRAIN_ACTIONS_VALID: sum(t.valid_actions for t in trajs) / max(sum(t.actions for t in trajs), 1),
        RESPONSE_TOKENS_MEAN: _mean(t.response_tokens for t in trajs),
        RESPONSE_THINK_TOKENS_MEAN: _mean(t.think_tokens for t in trajs),
    }


def entropy_adv_cov(advs: list[torch.Tensor], logps: list[torch.Tensor], masks: list[torch.Tensor]) -> float:
    """Mean over response tokens of (A_t - mean A)(log pi_t - mean log pi): the covariance that drives the
    policy's entropy change (veRL's Clip-Cov / KL-Cov act on it); positive lowers entropy."""
    flat_adv = torch.cat([adv[mask.bool()] for adv, mask in zip(advs, masks)]).float()
    flat_logp = torch.cat([logp[mask.bool()] for logp, mask in zip(logps, masks)]).float()
    if flat_adv.numel() == 0:
        return 0.0
    return ((flat_adv - flat_adv.mean()) * (flat_logp - flat_logp.mean())).mean().item()


def computed(value: torch.Tensor | None, what: str) -> torch.Tensor:
    """A per-token tensor an earlier step of the update fills in; its absence is a bug in the update."""
    if value is None:
        raise RuntimeError(f"the {what} of a micro-batch were never computed")
    return value


@dataclass
class MicroBatch:
    """Consecutive kept trajectories, padded together, and what each step of the update computes for them.

    Per-token tensors are (B, T-1), aligned with `mask` (1 on the model's tokens ids[:, 1:]).
    """

    rows: slice  # the trajectories' positions in the update's batch
    ids: torch.Tensor
    attention: torch.Tensor
    mask: torch.Tensor
    old_logp: torch.Tensor | None = None  # step 1, or the first training forward for the first mini-batch
    ref_logp: torch.Tensor | None = None  # step 1, when kl_coef > 0
    old_values: torch.Tensor | None = None  # step 1, PPO
    advantages: torch.Tensor | None = None  # step 2
    returns: torch.Tensor | None = None  # step 2, PPO

    @property
    def size(self) -> int:
        return self.ids.shape[0]


@dataclass
class UpdateStats:
    """What the optimiser step saw over one update, summarised into the actor/ and critic/ metrics."""

    token_sums: dict[str, float]  # actor/ metrics of per-token quantities, summed over the tokens trained on
    tokens: float = 0.0
    pg_losses: list[float] = field(default_factory=list)  # per micro-batch; they add up to a mini-batch's
    vf_losses: list[float] = field(default_factory=list)
    grad_norms: list[float] = field(default_factory=list)  # per optimizer step
    critic_grad_norms: list[float] = field(default_factory=list)
    skipped: int = 0
    critic_skipped: int = 0

    def summary(self, with_critic: bool) -> dict[str, float]:
        steps = max(len(self.grad_norms), 1)
        metrics = {key: total / max(self.tokens, 1.0) for key, total in self.token_sums.items()}
        metrics.update(
            {
                ACTOR_PG_LOSS: sum(self.pg_losses) / steps,
                ACTOR_GRAD_NORM: _finite_mean(self.grad_norms),
                ACTOR_SKIPPED_STEPS: float(self.skipped),
            }
        )
        if with_critic:
            metrics[CRITIC_VF_LOSS] = sum(self.vf_losses) / steps
            metrics[CRITIC_GRAD_NORM] = _finite_mean(self.critic_grad_norms)
            metrics[CRITIC_SKIPPED_STEPS] = float(self.critic_skipped)
        return metrics


class Trainer:
    def __init__(self, cfg: TrainConfig, init_dir: str | None = None):
        self.cfg = cfg
        algorithm, optim = cfg.algorithm, cfg.optim
        self.ppo = algorithm.advantage == "ppo"
        self.kl_in_reward = self.ppo and algorithm.kl_coef > 0
        self.kl_in_loss = not self.ppo and algorithm.kl_coef > 0  # GRPO
        self.policy: Policy = load_policy(
            cfg.model, with_critic=self.ppo, with_reference=algorithm.kl_coef > 0, init_dir=init_dir
        )
        self.chat = ChatFormat(self.policy.tokenizer, cfg.rollout.thinking)
        self.collapse = CollapseProbe(
            cfg.diagnostics.collapse_samples, cfg.seed, cfg.diagnostics.collapse_traj_samples
        )
        tokenizer = self.policy.tokenizer
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.actor_params = [p for p in self.policy.model.parameters() if p.requires_grad]
        self.actor_opt = torch.optim.AdamW(
            self.actor_params, lr=optim.actor_lr, weight_decay=optim.weight_decay, betas=(0.9, 0.999)
        )
        self.critic_params, self.critic_opt = [], None
        if self.policy.critic is not None:  # loaded exactly when self.ppo
            self.critic_params = [p for p in self.policy.critic.parameters() if p.requires_grad]
            self.critic_opt = torch.optim.AdamW(
                self.critic_params, lr=optim.critic_lr, weight_decay=optim.weight_decay
            )

    # ---- rollout ------------------------------------------------------------------------------------
    def play(
        self, seeds: list[int], groups: list[int], temperature: float, env_name: str | None = None
    ) -> list[Trajectory]:
        """Episodes in the training environment, or in the registered env_name with its default parameters."""
        policy = self.policy
        policy.model.eval()
        name, params = (
            (self.cfg.env.name, self.cfg.env.params)
            if env_name in (None, self.cfg.env.name)
            else (env_name, {})
        )
        with torch.no_grad(), policy.autocast():
            return rollout(
                policy.model,
                policy.tokenizer,
                self.chat,
                name,
                params,
                seeds,
                groups,
                self.cfg.rollout,
                temperature,
                policy.context_len,
            )

    def validation_metrics(self) -> dict[str, float]:
        """val/success in the training environment, and val/<env>/success for each of rollout.val_envs."""
        own = self.validate()
        per_env = BY_KEY[VAL_ENV_SUCCESS]
        return {
            VAL_SUCCESS: own,
            **{
                per_env.fill(env=name): own if name == self.cfg.env.name else self.validate(name)
                for name in self.cfg.rollout.val_envs
            },
        }

    def measure_collapse(self, step: int, trajs: list[Trajectory]) -> dict[str, float]:
        """Template-collapse metrics (trainer/collapse.py) of a rollout batch, timed as time/collapse_s."""
        started, policy = time.time(), self.policy
        policy.model.eval()
        with policy.autocast():
            found = self.collapse.measure(
                step, trajs, self.chat, policy.model, self.pad_id, self.cfg.optim.micro_batch_size
            )
        return {**found, TIME_COLLAPSE_S: time.time() - started}

    def validate(self, env_name: str | None = None) -> float:
        rollout_cfg = self.cfg.rollout
        seeds = list(range(VAL_SEED_BASE, VAL_SEED_BASE + rollout_cfg.val_seeds))
        chunk = max(rollout_cfg.env_groups * rollout_cfg.group_size, 64)
        devices = [self.policy.device] if self.policy.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # validation must not shift the training RNG stream
            torch.manual_seed(self.cfg.seed)
            trajs = [
                t
                for i in range(0, len(seeds), chunk)
                for t in self.play(
                    seeds[i : i + chunk],
                    list(range(i, i + len(seeds[i : i + chunk]))),
                    rollout_cfg.val_temperature,
                    env_name,
                )
            ]
        return _mean(float(t.success) for t in trajs)

    # ---- update: score -> advantages -> optimise -> summarise (the module docstring) ----------------
    def update(self, trajs: list[Trajectory], groups: torch.Tensor) -> dict[str, float]:
        """One update on the kept trajectories of a step; groups: each trajectory's group index."""
        rewards = torch.tensor([t.reward for t in trajs], dtype=torch.float32, device=self.policy.device)
        batches = self.micro_batches(trajs)
        first_order = torch.randperm(len(batches)).tolist()
        self.score(batches, reused=self.reused_old_logprobs(first_order))
        metrics = (
            self.gae_advantages(batches, rewards)
            if self.ppo
            else self.group_advantages(batches, rewards, groups)
        )
        stats = self.optimise(batches, first_order)
        return metrics | self.summarise(batches, stats)

    def micro_batches(self, trajs: list[Trajectory]) -> list[MicroBatch]:
        """The kept trajectories cut into micro-batches of optim.micro_batch_size, in order."""
        size, batches = self.cfg.optim.micro_batch_size, []
        for start in range(0, len(trajs), size):
            chunk = trajs[start : start + size]
            ids, attention, mask = pad_batch(chunk, self.pad_id, self.policy.device)
            batches.append(MicroBatch(slice(start, start + len(chunk)), ids, attention, mask))
        return batches

    @property
    def micro_per_mini(self) -> int:
        """Micro-batches accumulated into one optimizer step."""
        return max(1, self.cfg.optim.mini_batch_size // self.cfg.optim.micro_batch_size)

    def reused_old_logprobs(self, first_order: list[int]) -> set[int]:
        """Micro-batches whose old log-probs are their training forward's, detached: the first mini-batch of
        the first epoch trains before any optimizer step (TRL skips this pass the same way). PPO's KL reward
        needs every old log-prob before training starts."""
        return set() if self.kl_in_reward else set(first_order[: self.micro_per_mini])

    def score(self, batches: list[MicroBatch], reused: set[int]) -> None:
        """Step 1: old log-probs (except the reused ones), reference log-probs and old values, no gradients."""
        policy, temperature = self.policy, self.cfg.rollout.temperature
        policy.model.eval()
        with torch.no_grad(), policy.autocast():
            for j, batch in enumerate(batches):
                if j not in reused:
                    batch.old_logp = token_logprobs(
                        policy.model, batch.ids, batch.attention, batch.mask, temperature
                    )[0]
                if self.cfg.algorithm.kl_coef > 0:
                    with policy.reference() as reference:
                        batch.ref_logp = token_logprobs(
                            reference, batch.ids, batch.attention, batch.mask, temperature
                        )[0]
                if self.ppo:
                    batch.old_values = (
                        critic_values(policy.critic, batch.ids, batch.attention).float() * batch.mask
                    )

    def gae_advantages(self, batches: list[MicroBatch], rewards: torch.Tensor) -> dict[str, float]:
        """Step 2, PPO: token rewards (with the KL penalty), GAE, whitening. Returns the KL and critic metrics."""
        algorithm = self.cfg.algorithm
        metrics: dict[str, float] = {}
        kl_penalties = self.kl_penalties(batches) if self.kl_in_reward else []
        if kl_penalties:
            metrics[ACTOR_KL_REF] = sum(kl.sum().item() for kl in kl_penalties) / sum(
                b.mask.sum().item() for b in batches
            )
        for j, batch in enumerate(batches):
            kl = kl_penalties[j] if kl_penalties else None
            token_rewards = advantages.token_rewards(rewards[batch.rows], batch.mask, kl, algorithm.kl_coef)
            batch.advantages, batch.returns = advantages.gae(
                token_rewards,
                computed(batch.old_values, "old values"),
                batch.mask,
                algorithm.gamma,
                algorithm.lam,
            )
        if algorithm.whiten_advantages:  # over all assistant tokens of the batch
            whitened = advantages.whiten(
                [computed(b.advantages, "advantages") for b in batches], [b.mask for b in batches]
            )
            for batch, adv in zip(batches, whitened):
                batch.advantages = adv
        values = torch.cat([computed(b.old_values, "old values")[b.mask.bool()] for b in batches])
        returns = torch.cat([computed(b.returns, "returns")[b.mask.bool()] for b in batches])
        metrics[CRITIC_EXPLAINED_VAR] = losses.explained_variance(values, returns, torch.ones_like(returns))
        return metrics

    def kl_penalties(self, batches: list[MicroBatch]) -> list[torch.Tensor]:
        """KL_t(pi_old) on each micro-batch's model tokens, for PPO's token rewards."""
        estimator = self.cfg.algorithm.kl_estimator
        return [
            losses.kl_penalty(
                computed(b.old_logp, "old log-probs"), computed(b.ref_logp, "reference log-probs"), estimator
            )
            * b.mask
            for b in batches
        ]

    def group_advantages(
        self, batches: list[MicroBatch], rewards: torch.Tensor, groups: torch.Tensor
    ) -> dict[str, float]:
        """Step 2, GRPO / Dr. GRPO: one group-normalised advantage per trajectory, on each of its tokens."""
        per_trajectory = advantages.group_advantages(
            rewards, groups.to(self.policy.device), self.cfg.algorithm.advantage
        )
        for batch in batches:
            batch.advantages = per_trajectory[batch.rows].unsqueeze(1) * batch.mask
        return {}

    def optimise(self, batches: list[MicroBatch], first_order: list[int]) -> UpdateStats:
        """Step 3: epochs x mini-batches (one optimizer step each) x micro-batches (gradient accumulation)."""
        token_sums = {
            ACTOR_ENTROPY: 0.0,
            ACTOR_CLIP_FRAC: 0.0,
            ACTOR_CLIP_FRAC_HIGH: 0.0,
            ACTOR_APPROX_KL: 0.0,
        }
        if self.kl_in_loss:
            token_sums[ACTOR_KL_REF] = 0.0
        stats = UpdateStats(token_sums)
        self.policy.model.train()
        if self.policy.critic is not None:
            self.policy.critic.train()
        for epoch in range(self.cfg.optim.updates_per_batch):
            order = first_order if epoch == 0 else torch.randperm(len(batches)).tolist()
            for start in range(0, len(order), self.micro_per_mini):
                self.train_mini_batch([batches[j] for j in order[start : start + self.micro_per_mini]], stats)
        return stats

    def train_mini_batch(self, mini_batch: list[MicroBatch], stats: UpdateStats) -> None:
        """Accumulate the gradients of every micro-batch, then one actor (and critic) optimizer step."""
        n_seqs = sum(b.size for b in mini_batch)
        n_tokens = sum(b.mask.sum().item() for b in mini_batch)
        for batch in mini_batch:
            self.actor_backward(batch, n_seqs, n_tokens, stats)
            if self.ppo:
                self.critic_backward(batch, n_tokens, stats)
        grad_clip = self.cfg.optim.grad_clip
        norm, skipped = optimizer_step(self.actor_params, self.actor_opt, grad_clip)
        stats.grad_norms.append(norm)
        stats.skipped += skipped
        if self.ppo:
            norm, skipped = optimizer_step(self.critic_params, self.critic_opt, grad_clip)
            stats.critic_grad_norms.append(norm)
            stats.critic_skipped += skipped

    def actor_backward(self, batch: MicroBatch, n_seqs: int, n_tokens: float, stats: UpdateStats) -> None:
        """Back-propagate one micro-batch's share of L_actor (mini-batch totals n_seqs, n_tokens)."""
        algorithm, policy, mask = self.cfg.algorithm, self.policy, batch.mask
        with policy.autocast():
            logp, entropy = token_logprobs(
                policy.model,
                batch.ids,
                batch.attention,
                mask,
                self.cfg.rollout.temperature,
                with_entropy=True,
            )
            if batch.old_logp is None:  # a reused micro-batch: the policy has not moved yet
                batch.old_logp = logp.detach()
            pg_loss, clip_stats = losses.policy_loss(
                logp,
                batch.old_logp,
                computed(batch.advantages, "advantages"),
                mask,
                algorithm.eps_low,
                algorithm.eps_high,
                algorithm.dual_clip,
                algorithm.loss_agg,
                n_seqs,
                n_tokens,
            )
            entropy_bonus = losses.aggregate(entropy, mask, algorithm.loss_agg, n_seqs, n_tokens)
            loss = pg_loss - algorithm.entropy_coef * entropy_bonus
            if self.kl_in_loss:
                kl = losses.kl_penalty(
                    logp, computed(batch.ref_logp, "reference log-probs"), algorithm.kl_estimator
                )
                loss = loss + algorithm.kl_coef * losses.aggregate(
                    kl, mask, algorithm.loss_agg, n_seqs, n_tokens
                )
                stats.token_sums[ACTOR_KL_REF] += (kl.detach() * mask).sum().item()
        loss.backward()
        tokens = mask.sum().item()
        stats.tokens += tokens
        stats.pg_losses.append(pg_loss.item())
        stats.token_sums[ACTOR_ENTROPY] += (entropy * mask).sum().item()
        for key, name in CLIP_STATS.items():
            stats.token_sums[key] += clip_stats[name] * tokens

    def critic_backward(self, batch: MicroBatch, n_tokens: float, stats: UpdateStats) -> None:
        """Back-propagate one micro-batch's share of L_critic (token mean over the mini-batch's n_tokens)."""
        with self.policy.autocast():
            values = critic_values(self.policy.critic, batch.ids, batch.attention).float()
        vf_loss = losses.value_loss(
            values,
            computed(batch.old_values, "old values"),
            computed(batch.returns, "returns"),
            batch.mask,
            self.cfg.algorithm.value_clip,
            n_tokens,
        )
        vf_loss.backward()
        stats.vf_losses.append(vf_loss.item())

    def summarise(self, batches: list[MicroBatch], stats: UpdateStats) -> dict[str, float]:
        """Step 4: the entropy-advantage covariance and the optimiser's actor/ and critic/ metrics."""
        covariance = entropy_adv_cov(
            [computed(b.advantages, "advantages") for b in batches],
            [computed(b.old_logp, "old log-probs") for b in batches],
            [b.mask for b in batches],
        )
        return {ACTOR_ENTROPY_ADV_COV: covariance, **stats.summary(with_critic=self.ppo)}


@dataclass
class TrainingRun:
    """One call of `train`: the trainer, where its output goes, and the counters a checkpoint carries."""

    cfg: TrainConfig
    trainer: Trainer
    sink: Sink
    out_dir: str
    seed_counter: int  # the next training seed
    first_step: int = 0  # the resumed checkpoint's step, else 0
    last_saved: int = -1  # the step of the checkpoint written or resumed last, -1 for none
    empty_steps: int = 0  # consecutive steps the filter left empty (counted from this process's start)
    writer: str = field(default_factory=lambda: uuid.uuid4().hex)  # this call's mark on its checkpoints

    @classmethod
    def start(cls, cfg: TrainConfig, sink: Sink, out_dir: str, resume: bool) -> TrainingRun:
        """A fresh run, or when resume the one of out_dir's latest checkpoint (none: a fresh run)."""
        found = checkpoint.latest(out_dir) if resume else None
        run = cls(cfg, Trainer(cfg, init_dir=found), sink, out_dir, TRAIN_SEED_BASE + cfg.seed * 10_000_000)
        if found:
            run.restore(found)
        else:
            # Building the models drew random numbers that depend on the algorithm (PPO's critic head, LoRA's
            # matrices): from the seed again, so that one seed plays the same first episodes under any of them.
            reseed(cfg)
        return run

    def restore(self, path: str) -> None:
        """The step, seed counter, optimizer states and RNG states of the checkpoint at path."""
        state = checkpoint.load_state(path)
        self.first_step = self.last_saved = state["step"]
        self.seed_counter = state["seed_counter"]
        self.trainer.actor_opt.load_state_dict(state["optim"]["actor"])
        if self.trainer.critic_opt is not None and state["optim"]["critic"] is not None:
            self.trainer.critic_opt.load_state_dict(state["optim"]["critic"])
        checkpoint.restore_rng(state["rng"])

    def step(self, step: int) -> None:
        """One training step: play -> collapse probe -> filter -> update -> validate -> log -> checkpoint."""
        started = time.time()
        memory.step_began(self.trainer.policy.device)
        trajs = self.play()
        played = time.time()
        rewards = torch.tensor([t.reward for t in trajs], dtype=torch.float32)
        rewards = rewards.view(self.cfg.rollout.env_groups, self.cfg.rollout.group_size)
        metrics = rollout_metrics(trajs, rewards)
        if due(self.cfg.diagnostics.collapse_every, step):
            metrics.update(self.trainer.measure_collapse(step, trajs))
        kept, filter_metrics = self.filter(trajs, rewards)
        metrics.update(filter_metrics)
        if kept:
            metrics.update(self.trainer.update(kept, torch.tensor([t.group for t in kept])))
        updated = time.time()
        if self.validation_due(step):
            metrics.update(self.trainer.validation_metrics())
        metrics.update(timing_metrics(trajs, started, played, updated))
        metrics.update(memory.memory_metrics(self.trainer.policy.device))
        self.sink.records(step, TRAIN_REWARD_STD_HIST, in_group_std(rewards).tolist())  # the filter's input
        self.log(step, metrics, trajs)
        self.end_step(step)

    def play(self) -> list[Trajectory]:
        """This step's P x N training episodes: group g plays the seed seed_counter + g, N times."""
        groups, group_size = self.cfg.rollout.env_groups, self.cfg.rollout.group_size
        seeds = [self.seed_counter + g for g in range(groups) for _ in range(group_size)]
        self.seed_counter += groups
        group_of = [g for g in range(groups) for _ in range(group_size)]
        return self.trainer.play(seeds, group_of, self.cfg.rollout.temperature)

    def filter(
        self, trajs: list[Trajectory], rewards: torch.Tensor
    ) -> tuple[list[Trajectory], dict[str, float]]:
        """The trajectories of the groups the StarPO-S filter keeps (filter.py), and the filter's metrics."""
        algorithm = self.cfg.algorithm
        kept = keep_groups(
            rewards,
            algorithm.filter,
            algorithm.filter_value,
            algorithm.filter_include_zero,
            algorithm.filter_top_p_mode,
        )
        self.empty_steps = 0 if kept else self.empty_steps + 1
        metrics = {
            TRAIN_FILTER_KEPT_RATIO: len(kept) / self.cfg.rollout.env_groups,
            TRAIN_FILTER_ZERO_GROUPS: float(zero_groups(rewards)),
            TRAIN_FILTER_SKIPPED: float(not kept),
        }
        return [t for t in trajs if t.group in kept], metrics

    def validation_due(self, step: int) -> bool:
        """Validation runs on step 0, every schedule.val_every steps, and the last step (never when 0)."""
        schedule = self.cfg.schedule
        return due(schedule.val_every, step) or (schedule.val_every > 0 and step == schedule.steps - 1)

    def log(self, step: int, metrics: dict[str, float], trajs: list[Trajectory]) -> None:
        """The step's metrics, schedule.samples_per_step samples (one per group in turn), and progress."""
        rollout_cfg, schedule = self.cfg.rollout, self.cfg.schedule
        self.sink.metrics(step, metrics)
        one_per_group_in_turn = [
            trajs[g * rollout_cfg.group_size + i]
            for i in range(rollout_cfg.group_size)
            for g in range(rollout_cfg.env_groups)
        ]
        tokenizer = self.trainer.policy.tokenizer
        self.sink.samples(
            step, [t.sample(tokenizer) for t in one_per_group_in_turn[: schedule.samples_per_step]]
        )
        self.sink.progress(step + 1, schedule.steps)

    def end_step(self, step: int) -> None:
        """Checkpoint on schedule; stop (checkpointed) when the filter has starved the run."""
        if due(self.cfg.schedule.checkpoint_every, step + 1):
            self.save(step + 1)
        stop_after = self.cfg.algorithm.filter_empty_stop_steps
        if stop_after and self.empty_steps >= stop_after:
            self.save(step + 1)
            raise FilterStarved(
                f"the rollout filter ({self.cfg.algorithm.filter}) kept no group for {self.empty_steps} steps"
                f" in a row (every group's rewards were equal, or the threshold was not reached): "
                f"training stopped at step {step + 1}, as RAGEN-2 does after "
                f"algorithm.filter_empty_stop_steps={stop_after}"
            )

    def save(self, next_step: int) -> None:
        """A checkpoint to resume at next_step, unless the last one written or resumed is that one."""
        if self.last_saved == next_step:
            return
        trainer = self.trainer
        path = checkpoint.save(
            self.out_dir,
            next_step,
            trainer.policy,
            trainer.actor_opt,
            trainer.critic_opt,
            self.cfg.to_yaml(),
            self.seed_counter,
            self.writer,
        )
        checkpoint.prune(
            self.out_dir,
            self.cfg.schedule.keep_checkpoints,
            self.writer,
            since=self.first_step,
            resumable=self.sink.stored_step(),
        )
        self.last_saved = next_step
        self.sink.checkpoint(next_step, path)


def due(every: int, step: int) -> bool:
    """Whether a thing scheduled every `every` steps (0 = never) runs at `step`."""
    return every > 0 and step % every == 0


def timing_metrics(
    trajs: list[Trajectory], started: float, played: float, updated: float
) -> dict[str, float]:
    """The step's time/ and perf/ metrics; the step's time runs until now, so it includes validation."""
    generated = sum(t.response_tokens for t in trajs)
    return {
        TIME_ROLLOUT_S: played - started,
        TIME_UPDATE_S: updated - played,
        TIME_STEP_S: time.time() - started,
        PERF_TOKENS_PER_S: generated / max(played - started, 1e-9),
    }


def train(
    cfg: TrainConfig,
    sink: Sink,
    out_dir: str,
    should_stop: Callable[[], bool] = lambda: False,
    resume: bool = False,
) -> str:
    """Run cfg.schedule.steps steps (from the latest checkpoint when resume). Returns "completed" | "stopped"."""
    set_determinism(cfg)
    os.makedirs(out_dir, exist_ok=True)
    run = TrainingRun.start(cfg, sink, out_dir, resume)
    for step in range(run.first_step, cfg.schedule.steps):
        if should_stop():
            run.save(step)
            return "stopped"
        run.step(step)
    run.save(max(cfg.schedule.steps, run.first_step))
    return "completed"
