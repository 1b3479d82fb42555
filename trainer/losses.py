"""Losses on (B, T) per-token tensors with a 0/1 `mask` of the model's tokens. How they combine into the
StarPO / StarPO-S objective: the module docstring of trainer/loop.py.

Aggregation divides by mini-batch totals (n_seqs, n_tokens) so that micro-batch losses add up to the
mini-batch loss under gradient accumulation; by default they are this batch's own totals.
"""

from __future__ import annotations

import torch

LOG_RATIO_BOUND = 20.0  # veRL clamps log-probability ratios to +-20 before exp (policy loss, k3)
K3_BOUND = 10.0  # and the k3 estimate to +-10


def aggregate(
    x: torch.Tensor, mask: torch.Tensor, mode: str, n_seqs: int | None = None, n_tokens: float | None = None
) -> torch.Tensor:
    mask = mask.to(x.dtype)
    n_seqs = x.shape[0] if n_seqs is None else n_seqs
    if mode == "token-mean":
        tokens = mask.sum() if n_tokens is None else n_tokens
        return (x * mask).sum() / max(float(tokens), 1.0)
    per_seq = (x * mask).sum(1)
    if mode == "seq-mean-token-mean":
        per_seq = per_seq / mask.sum(1).clamp(min=1.0)
    elif mode != "seq-mean-token-sum":
        raise ValueError(f"unknown loss aggregation {mode!r}")
    return per_seq.sum() / n_seqs


def policy_loss(
    logp,
    old_logp,
    adv,
    mask,
    eps_low: float,
    eps_high: float,
    dual_clip: float,
    mode: str,
    n_seqs: int | None = None,
    n_tokens: float | None = None,
):
    """PPO clipped loss with asymmetric clipping (clip-higher) and dual-clip for negative advantages. The
    log-ratio is clamped to +-20 first, as veRL: a ratio that overflowed to inf made a token with advantage 0
    NaN (0 * inf), and without dual-clip a negative advantage an infinite loss."""
    log_ratio = torch.clamp(logp - old_logp, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
    ratio = torch.exp(log_ratio)
    unclipped = -adv * ratio
    clipped = -adv * torch.clamp(ratio, 1 - eps_low, 1 + eps_high)
    loss = torch.maximum(unclipped, clipped)
    if dual_clip > 0:  # with A < 0 a huge ratio would push without bound: cap the loss at -c * A
        loss = torch.where(adv < 0, torch.minimum(loss, -adv * dual_clip), loss)
    tokens = mask.bool()
    above_high = (ratio > 1 + eps_high) & (adv > 0)  # clipped at the upper bound 1 + eps_high
    stats = {
        "clip_frac": (clipped > unclipped)[tokens].float().mean().item() if tokens.any() else 0.0,
        "clip_frac_high": above_high[tokens].float().mean().item() if tokens.any() else 0.0,
        "approx_kl": -log_ratio[tokens].mean().item() if tokens.any() else 0.0,
    }
    return aggregate(loss, mask, mode, n_seqs, n_tokens), stats


def kl_penalty(logp: torch.Tensor, ref_logp: torch.Tensor, estimator: str) -> torch.Tensor:
    """Per-token estimate of KL(pi || pi_ref) from samples of pi. k1: log ratio; k3: r - 1 - log r, r=ref/pi,
    with veRL's clamps (log r to +-20, the estimate to +-10), so a token the policy has all but dropped
    (r = e^30) adds 10 to the loss, not e^30."""
    log_ratio = logp - ref_logp
    if estimator == "k1":
        return log_ratio
    if estimator == "k3":
        log_r = torch.clamp(-log_ratio, -LOG_RATIO_BOUND, LOG_RATIO_BOUND)
        return torch.clamp(torch.exp(log_r) - 1 - log_r, -K3_BOUND, K3_BOUND)
    raise ValueError(f"unknown KL estimator {estimator!r}")


def value_loss(values, old_values, returns, mask, clip: float, n_tokens: float | None = None):
    """0.5 * max((V - R)^2, (V_clipped - R)^2), V_clipped = V_old + clip(V - V_old, -c, c); token mean."""
    clipped = old_values + torch.clamp(values - old_values, -clip, clip)
    loss = 0.5 * torch.maximum((values - returns) ** 2, (clipped - returns) ** 2)
    return aggregate(loss, mask, "token-mean", n_tokens=n_tokens)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    on_mask = mask.bool()
    values, returns = values[on_mask], returns[on_mask]
    # Returns equal up to float rounding (every trajectory the same reward) leave nothing to explain;
    # dividing by their rounding-sized variance read -1e13.
    if returns.numel() < 2 or returns.var() <= 1e-12 * returns.pow(2).mean():
        return 0.0
    return (1 - (returns - values).var() / returns.var()).item()
