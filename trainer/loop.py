"""The training loop: rollout -> filter -> advantages -> clipped updates, with metrics and checkpoints."""

from __future__ import annotations

import math
import os
import random
import time
from collections.abc import Callable

import torch

from trainer import advantages as A
from trainer import checkpoint, losses, prefix
from trainer.collapse import CollapseProbe
from trainer.config import TrainConfig
from trainer.filter import keep_groups, zero_groups
from trainer.models import Policy, load_policy
from trainer.rollout import ChatFormat, Trajectory, rollout

TRAIN_SEED_BASE = 10_000  # training seeds: TRAIN_SEED_BASE + seed * 10^7 + counter
VAL_SEED_BASE = 0  # validation seeds: 0 .. val_seeds-1, fixed


class FilterStarved(RuntimeError):
    """The rollout filter kept no group for algorithm.filter_empty_stop_steps steps in a row (as RAGEN-2)."""


def set_determinism(cfg: TrainConfig) -> None:
    random.seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    if cfg.deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.backends.cudnn.benchmark = False


def pad_batch(
    trajs: list[Trajectory], pad_id: int, device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ids, attention, resp): right padded; resp (B, T-1) marks the model's tokens ids[:, 1:]."""
    T = max(len(t.ids) for t in trajs)
    ids = torch.full((len(trajs), T), pad_id, dtype=torch.long)
    attention = torch.zeros((len(trajs), T), dtype=torch.long)
    mask = torch.zeros((len(trajs), T), dtype=torch.float32)
    for i, t in enumerate(trajs):
        ids[i, : len(t.ids)] = torch.tensor(t.ids)
        attention[i, : len(t.ids)] = 1
        mask[i, : len(t.ids)] = torch.tensor(t.mask, dtype=torch.float32)
    return ids.to(device), attention.to(device), mask[:, 1:].to(device)


def token_logprobs(model, ids, attention, resp, temperature: float, with_entropy: bool = False):
    """log pi(token_t | prefix) for t >= 1 as (B, T-1); only the model's tokens are computed, others 0."""
    logits = prefix.forward(model, ids, attention, lambda out: out.logits)[:, :-1]
    sel = resp.bool()
    chosen = logits[sel].float()
    if temperature > 0:
        chosen = chosen / temperature
    logp_all = torch.log_softmax(chosen, dim=-1)
    logp = torch.zeros(resp.shape, device=ids.device, dtype=torch.float32)
    logp[sel] = logp_all.gather(-1, ids[:, 1:][sel].unsqueeze(-1)).squeeze(-1)
    if not with_entropy:
        return logp, None
    entropy = torch.zeros_like(logp)
    entropy[sel] = -(logp_all.exp() * logp_all).sum(-1)
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


def rollout_metrics(trajs: list[Trajectory], rewards: torch.Tensor) -> dict[str, float]:
    """rewards: (P, N) raw trajectory rewards."""
    std = rewards.std(dim=1) if rewards.shape[1] > 1 else torch.zeros(rewards.shape[0])
    turns = [turn for t in trajs for turn in t.turns]
    return {
        "train/success": _mean(float(t.success) for t in trajs),
        "train/reward_mean": rewards.mean().item(),
        "train/reward_std_in_group": std.mean().item(),
        "train/frac_zero_std_groups": (std < 1e-6).float().mean().item(),
        "train/format_valid": _mean(t.format_ok / max(len(t.turns), 1) for t in trajs) if turns else 0.0,
        "train/actions_valid": sum(t.valid_actions for t in trajs) / max(sum(t.actions for t in trajs), 1),
        "response/tokens_mean": _mean(t.response_tokens for t in trajs),
        "response/think_tokens_mean": _mean(t.think_tokens for t in trajs),
    }


def computed(logps: list[torch.Tensor | None]) -> list[torch.Tensor]:
    """The old log-probs once every micro-batch has them (a reused one is filled by its first forward)."""
    missing = [j for j, logp in enumerate(logps) if logp is None]
    if missing:
        raise RuntimeError(f"old log-probs of micro-batches {missing} were never computed")
    return [logp for logp in logps if logp is not None]


def entropy_adv_cov(advs: list[torch.Tensor], logps: list[torch.Tensor], masks: list[torch.Tensor]) -> float:
    """Mean over response tokens of (A_t - mean A)(log pi_t - mean log pi): the covariance that drives the
    policy's entropy change (veRL's Clip-Cov / KL-Cov act on it); positive lowers entropy."""
    adv = torch.cat([a[m.bool()] for a, m in zip(advs, masks)]).float()
    logp = torch.cat([lp[m.bool()] for lp, m in zip(logps, masks)]).float()
    if adv.numel() == 0:
        return 0.0
    return ((adv - adv.mean()) * (logp - logp.mean())).mean().item()


class Trainer:
    def __init__(self, cfg: TrainConfig, init_dir: str | None = None):
        self.cfg = cfg
        a = cfg.algorithm
        self.ppo = a.advantage == "ppo"
        self.policy: Policy = load_policy(
            cfg.model, with_critic=self.ppo, with_reference=a.kl_coef > 0, init_dir=init_dir
        )
        self.chat = ChatFormat(self.policy.tokenizer, cfg.rollout.thinking)
        self.collapse = CollapseProbe(cfg.diagnostics.collapse_samples, cfg.seed)
        tok = self.policy.tokenizer
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        o = cfg.optim
        self.actor_params = [p for p in self.policy.model.parameters() if p.requires_grad]
        self.actor_opt = torch.optim.AdamW(
            self.actor_params, lr=o.actor_lr, weight_decay=o.weight_decay, betas=(0.9, 0.999)
        )
        self.critic_params, self.critic_opt = [], None
        if self.policy.critic is not None:  # loaded exactly when self.ppo
            self.critic_params = [p for p in self.policy.critic.parameters() if p.requires_grad]
            self.critic_opt = torch.optim.AdamW(
                self.critic_params, lr=o.critic_lr, weight_decay=o.weight_decay
            )

    # ---- rollout ------------------------------------------------------------------------------------
    def play(
        self, seeds: list[int], groups: list[int], temperature: float, env_name: str | None = None
    ) -> list[Trajectory]:
        """Episodes in the training environment, or in the registered env_name with its default parameters."""
        p = self.policy
        p.model.eval()
        name, params = (
            (self.cfg.env.name, self.cfg.env.params)
            if env_name in (None, self.cfg.env.name)
            else (env_name, {})
        )
        with torch.no_grad(), p.autocast():
            return rollout(
                p.model,
                p.tokenizer,
                self.chat,
                name,
                params,
                seeds,
                groups,
                self.cfg.rollout,
                temperature,
                p.context_len,
            )

    def validation_metrics(self) -> dict[str, float]:
        """val/success in the training environment, and val/<env>/success for each of rollout.val_envs."""
        own = self.validate()
        return {
            "val/success": own,
            **{
                f"val/{name}/success": own if name == self.cfg.env.name else self.validate(name)
                for name in self.cfg.rollout.val_envs
            },
        }

    def measure_collapse(self, step: int, trajs: list[Trajectory]) -> dict[str, float]:
        """Template-collapse metrics (trainer/collapse.py) of a rollout batch, timed as time/collapse_s."""
        t0, p = time.time(), self.policy
        p.model.eval()
        with p.autocast():
            found = self.collapse.measure(
                step, trajs, self.chat, p.model, self.pad_id, self.cfg.optim.micro_batch_size
            )
        return {**found, "time/collapse_s": time.time() - t0}

    def validate(self, env_name: str | None = None) -> float:
        r = self.cfg.rollout
        seeds = list(range(VAL_SEED_BASE, VAL_SEED_BASE + r.val_seeds))
        chunk = max(r.env_groups * r.group_size, 64)
        devices = [self.policy.device] if self.policy.device.type == "cuda" else []
        with torch.random.fork_rng(devices=devices):  # validation must not shift the training RNG stream
            torch.manual_seed(self.cfg.seed)
            trajs = [
                t
                for i in range(0, len(seeds), chunk)
                for t in self.play(
                    seeds[i : i + chunk],
                    list(range(i, i + len(seeds[i : i + chunk]))),
                    r.val_temperature,
                    env_name,
                )
            ]
        return _mean(float(t.success) for t in trajs)

    # ---- update -------------------------------------------------------------------------------------
    def update(self, trajs: list[Trajectory], groups: torch.Tensor) -> dict[str, float]:
        cfg, p = self.cfg, self.policy
        a, o = cfg.algorithm, cfg.optim
        temp = cfg.rollout.temperature
        rewards = torch.tensor([t.reward for t in trajs], dtype=torch.float32, device=p.device)
        mb = o.micro_batch_size
        batches = [pad_batch(trajs[i : i + mb], self.pad_id, p.device) for i in range(0, len(trajs), mb)]

        micro_per_mini = max(1, o.mini_batch_size // mb)
        first_order = torch.randperm(len(batches)).tolist()
        kl_in_reward = self.ppo and a.kl_coef > 0
        kl_in_loss = not self.ppo and a.kl_coef > 0  # GRPO
        # The first mini-batch of the first epoch is trained before any optimizer step, so its old
        # log-probs are its training forward's, detached (TRL skips this pass the same way); the KL
        # reward needs them before training starts.
        reuse = set() if kl_in_reward else set(first_order[:micro_per_mini])

        # old log-probs, reference log-probs and values, computed once per rollout batch
        p.model.eval()
        old_logp: list[torch.Tensor | None] = []
        ref_logp: list[torch.Tensor] = []
        old_values: list[torch.Tensor] = []
        with torch.no_grad(), p.autocast():
            for j, (ids, att, resp) in enumerate(batches):
                old_logp.append(None if j in reuse else token_logprobs(p.model, ids, att, resp, temp)[0])
                if a.kl_coef > 0:
                    with p.reference() as ref:
                        ref_logp.append(token_logprobs(ref, ids, att, resp, temp)[0])
                if self.ppo:
                    old_values.append(critic_values(p.critic, ids, att).float() * resp)

        metrics: dict[str, float] = {}
        kls = (
            [
                losses.kl_penalty(lp, rp, a.kl_estimator) * r
                for lp, rp, (_, _, r) in zip(computed(old_logp), ref_logp, batches)
            ]
            if kl_in_reward
            else []
        )
        if kls:
            metrics["actor/kl_ref"] = sum(k.sum().item() for k in kls) / sum(
                b[2].sum().item() for b in batches
            )
        advs, rets = [], []
        if self.ppo:
            for j, (ids, _, resp) in enumerate(batches):
                tr = A.token_rewards(
                    rewards[j * mb : j * mb + len(ids)], resp, kls[j] if kls else None, a.kl_coef
                )
                adv, ret = A.gae(tr, old_values[j], resp, a.gamma, a.lam)
                advs.append(adv)
                rets.append(ret)
            if a.whiten_advantages:  # over all assistant tokens of the batch
                advs = A.whiten(advs, [resp for _, _, resp in batches])
            ev_v = torch.cat([v[r.bool()] for v, (_, _, r) in zip(old_values, batches)])
            ev_r = torch.cat([x[r.bool()] for x, (_, _, r) in zip(rets, batches)])
            metrics["critic/explained_var"] = losses.explained_variance(ev_v, ev_r, torch.ones_like(ev_r))
        else:
            traj_adv = A.group_advantages(rewards, groups.to(p.device), a.advantage)
            advs = [
                traj_adv[j * mb : j * mb + len(ids)].unsqueeze(1) * resp
                for j, (ids, _, resp) in enumerate(batches)
            ]

        # clipped updates: mini-batches of trajectories, gradient accumulation over micro-batches
        stats: dict[str, list[float]] = {
            "pg_loss": [],
            "grad_norm": [],
            "vf_loss": [],
            "critic_grad_norm": [],
        }
        token_sums = {"entropy": 0.0, "clip_frac": 0.0, "clip_frac_high": 0.0, "approx_kl": 0.0}
        if kl_in_loss:
            token_sums["kl_ref"] = 0.0
        seen_tokens = 0.0
        skipped = critic_skipped = 0
        p.model.train()
        if p.critic is not None:
            p.critic.train()
        for epoch in range(o.updates_per_batch):
            order = first_order if epoch == 0 else torch.randperm(len(batches)).tolist()
            for start in range(0, len(order), micro_per_mini):
                chunk = order[start : start + micro_per_mini]
                n_seqs = sum(batches[j][0].shape[0] for j in chunk)
                n_tokens = sum(batches[j][2].sum().item() for j in chunk)
                for j in chunk:
                    ids, att, resp = batches[j]
                    with p.autocast():
                        logp, ent = token_logprobs(p.model, ids, att, resp, temp, with_entropy=True)
                        if old_logp[j] is None:
                            old_logp[j] = logp.detach()
                        pg, s = losses.policy_loss(
                            logp,
                            old_logp[j],
                            advs[j],
                            resp,
                            a.eps_low,
                            a.eps_high,
                            a.dual_clip,
                            a.loss_agg,
                            n_seqs,
                            n_tokens,
                        )
                        ent_agg = losses.aggregate(ent, resp, a.loss_agg, n_seqs, n_tokens)
                        loss = pg - a.entropy_coef * ent_agg
                        if kl_in_loss:
                            kl = losses.kl_penalty(logp, ref_logp[j], a.kl_estimator)
                            loss = loss + a.kl_coef * losses.aggregate(kl, resp, a.loss_agg, n_seqs, n_tokens)
                            token_sums["kl_ref"] += (kl.detach() * resp).sum().item()
                    loss.backward()
                    n = resp.sum().item()
                    seen_tokens += n
                    stats["pg_loss"].append(pg.item())
                    token_sums["entropy"] += (ent * resp).sum().item()
                    for k in ("clip_frac", "clip_frac_high", "approx_kl"):
                        token_sums[k] += s[k] * n
                    if self.ppo:
                        with p.autocast():
                            values = critic_values(p.critic, ids, att).float()
                        vf = losses.value_loss(values, old_values[j], rets[j], resp, a.value_clip, n_tokens)
                        vf.backward()
                        stats["vf_loss"].append(vf.item())
                norm, skip = optimizer_step(self.actor_params, self.actor_opt, o.grad_clip)
                stats["grad_norm"].append(norm)
                skipped += skip
                if self.ppo:
                    cnorm, cskip = optimizer_step(self.critic_params, self.critic_opt, o.grad_clip)
                    stats["critic_grad_norm"].append(cnorm)
                    critic_skipped += cskip
        n_mini = len(stats["grad_norm"])
        metrics["actor/entropy_adv_cov"] = entropy_adv_cov(advs, computed(old_logp), [b[2] for b in batches])
        metrics.update({f"actor/{k}": v / max(seen_tokens, 1.0) for k, v in token_sums.items()})
        metrics.update(
            {
                "actor/pg_loss": sum(stats["pg_loss"]) / max(n_mini, 1),
                "actor/grad_norm": _finite_mean(stats["grad_norm"]),
                "actor/skipped_steps": float(skipped),
            }
        )
        if self.ppo:
            metrics["critic/vf_loss"] = sum(stats["vf_loss"]) / max(n_mini, 1)
            metrics["critic/grad_norm"] = _finite_mean(stats["critic_grad_norm"])
            metrics["critic/skipped_steps"] = float(critic_skipped)
        return metrics


def train(
    cfg: TrainConfig,
    sink,
    out_dir: str,
    should_stop: Callable[[], bool] = lambda: False,
    resume: bool = False,
) -> str:
    """Run cfg.schedule.steps steps (from the latest checkpoint when resume). Returns "completed" | "stopped"."""
    set_determinism(cfg)
    os.makedirs(out_dir, exist_ok=True)
    start, seed_counter = 0, TRAIN_SEED_BASE + cfg.seed * 10_000_000
    found = checkpoint.latest(out_dir) if resume else None
    trainer = Trainer(cfg, init_dir=found)
    if found:
        state = checkpoint.load_state(found)
        start, seed_counter = state["step"], state["seed_counter"]
        trainer.actor_opt.load_state_dict(state["optim"]["actor"])
        if trainer.critic_opt is not None and state["optim"]["critic"] is not None:
            trainer.critic_opt.load_state_dict(state["optim"]["critic"])
        checkpoint.restore_rng(state["rng"])
    s, r, a, d = cfg.schedule, cfg.rollout, cfg.algorithm, cfg.diagnostics
    config_yaml = cfg.to_yaml()
    last_saved = start if found else -1
    empty_steps = 0  # consecutive steps the filter left empty (counted from this process's start)

    def save(next_step: int) -> None:
        nonlocal last_saved
        if last_saved == next_step:
            return
        path = checkpoint.save(
            out_dir,
            next_step,
            trainer.policy,
            trainer.actor_opt,
            trainer.critic_opt,
            config_yaml,
            seed_counter,
            s.keep_checkpoints,
        )
        last_saved = next_step
        sink.checkpoint(next_step, path)

    for step in range(start, s.steps):
        if should_stop():
            save(step)
            return "stopped"
        t0 = time.time()
        seeds = [seed_counter + g for g in range(r.env_groups) for _ in range(r.group_size)]
        groups = [g for g in range(r.env_groups) for _ in range(r.group_size)]
        seed_counter += r.env_groups
        trajs = trainer.play(seeds, groups, r.temperature)
        t1 = time.time()
        rewards = torch.tensor([t.reward for t in trajs], dtype=torch.float32).view(
            r.env_groups, r.group_size
        )
        metrics = rollout_metrics(trajs, rewards)
        if d.collapse_every and step % d.collapse_every == 0:
            metrics.update(trainer.measure_collapse(step, trajs))
        kept = keep_groups(rewards, a.filter, a.filter_value, a.filter_include_zero, a.filter_top_p_mode)
        empty_steps = 0 if kept else empty_steps + 1
        metrics.update(
            {
                "train/filter_kept_ratio": len(kept) / r.env_groups,
                "train/filter_zero_groups": float(zero_groups(rewards)),
                "train/filter_skipped": float(not kept),
            }
        )
        kept_trajs = [t for t in trajs if t.group in kept]
        if kept_trajs:
            metrics.update(trainer.update(kept_trajs, torch.tensor([t.group for t in kept_trajs])))
        t2 = time.time()
        if s.val_every and (step % s.val_every == 0 or step == s.steps - 1):
            metrics.update(trainer.validation_metrics())
        generated = sum(t.response_tokens for t in trajs)
        metrics.update(
            {
                "time/rollout_s": t1 - t0,
                "time/update_s": t2 - t1,
                "time/step_s": time.time() - t0,
                "perf/tokens_per_s": generated / max(t1 - t0, 1e-9),
            }
        )
        sink.metrics(step, metrics)
        spread = [trajs[g * r.group_size + i] for i in range(r.group_size) for g in range(r.env_groups)]
        sink.samples(step, [t.sample(trainer.policy.tokenizer) for t in spread[: s.samples_per_step]])
        sink.progress(step + 1, s.steps)
        if s.checkpoint_every and (step + 1) % s.checkpoint_every == 0:
            save(step + 1)
        if a.filter_empty_stop_steps and empty_steps >= a.filter_empty_stop_steps:
            save(step + 1)
            raise FilterStarved(
                f"the rollout filter ({a.filter}) kept no group for {empty_steps} steps in a "
                f"row (every group's rewards were equal, or the threshold was not reached): "
                f"training stopped at step {step + 1}, as RAGEN-2 does after "
                f"algorithm.filter_empty_stop_steps={a.filter_empty_stop_steps}"
            )
    save(max(s.steps, start))
    return "completed"
