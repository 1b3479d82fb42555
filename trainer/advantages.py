"""Advantages: GAE over the model's own tokens (PPO), group-normalised rewards (GRPO, Dr. GRPO).

Per-token tensors are (B, T) and aligned with a 0/1 `mask` of the model's tokens; observation tokens
(mask 0) are skipped: the recursion jumps from one assistant token to the next across them.
"""

from __future__ import annotations

import torch


def gae(
    rewards: torch.Tensor, values: torch.Tensor, mask: torch.Tensor, gamma: float = 1.0, lam: float = 1.0
):
    """Generalised advantage estimation over masked-in tokens. Returns (advantages, returns), 0 off-mask."""
    rows, width = rewards.shape
    advantages = torch.zeros_like(rewards)
    next_value = rewards.new_zeros(rows)
    next_adv = rewards.new_zeros(rows)
    for t in reversed(range(width)):
        model_token = mask[:, t].bool()
        delta = rewards[:, t] + gamma * next_value - values[:, t]
        adv_t = delta + gamma * lam * next_adv
        advantages[:, t] = torch.where(model_token, adv_t, 0.0)
        next_adv = torch.where(model_token, adv_t, next_adv)  # carried unchanged across observation tokens
        next_value = torch.where(model_token, values[:, t], next_value)
    returns = (advantages + values) * mask
    return advantages, returns


def whiten(xs: list[torch.Tensor], masks: list[torch.Tensor], eps: float = 1e-8) -> list[torch.Tensor]:
    """Zero mean, unit variance over the masked-in entries of all micro-batches together, as veRL's
    masked_whiten: unbiased variance, scaled by rsqrt(var + eps) (so entries equal but for float rounding
    stay rounding-sized, where dividing by std + eps blew them up to about +-1). Fewer than two entries are
    left as they are (veRL raises)."""
    vals = torch.cat([x[mask.bool()] for x, mask in zip(xs, masks)])
    if vals.numel() < 2:
        return [x * mask for x, mask in zip(xs, masks)]
    mean, scale = vals.mean(), torch.rsqrt(vals.var() + eps)
    return [((x - mean) * scale) * mask for x, mask in zip(xs, masks)]


def group_advantages(
    rewards: torch.Tensor, groups: torch.Tensor, mode: str, eps: float = 1e-6
) -> torch.Tensor:
    """One advantage per trajectory. grpo: (R - mean_g) / (std_g + eps); drgrpo: R - mean_g.

    std is unbiased (torch default, as RAGEN/veRL); a group whose rewards are all equal gets 0.
    """
    adv = torch.zeros_like(rewards)
    for group in groups.unique():
        members = groups == group
        group_rewards = rewards[members]
        centred = group_rewards - group_rewards.mean()
        if mode == "grpo":
            std = group_rewards.std() if group_rewards.numel() > 1 else group_rewards.new_tensor(0.0)
            centred = centred / (std + eps)
        adv[members] = centred
    return adv


def token_rewards(
    final_reward: torch.Tensor, mask: torch.Tensor, kl: torch.Tensor | None = None, kl_coef: float = 0.0
) -> torch.Tensor:
    """(B, T) PPO rewards: the trajectory reward on the last masked-in token of each row, minus
    kl_coef * kl on every masked-in token when a per-token KL to the reference is given (veRL's penalty)."""
    out = torch.zeros(mask.shape, dtype=final_reward.dtype, device=mask.device)
    last = mask.shape[1] - 1 - mask.flip(1).float().argmax(1)
    has = mask.any(1)
    out[has, last[has]] = final_reward[has]
    if kl is not None:
        out = out - kl_coef * kl * mask
    return out
