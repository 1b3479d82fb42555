"""StarPO-S rollout filtering: keep whole groups whose RAW rewards (incl. format penalty) vary most."""
from __future__ import annotations

import math

import torch


def keep_groups(rewards: torch.Tensor, mode: str, ratio: float = 0.25, top_p: float = 0.9) -> list[int]:
    """rewards: (P, N) raw trajectory rewards. Returns the kept group indices, ascending.

    top_ratio: the ceil(ratio * P) groups with the highest in-group std (ties: lower index first).
    top_p (RAGEN-2, SNR-aware): drop zero-variance groups, then keep the highest-variance groups until
    they cover top_p of the total reward variance.
    """
    P = rewards.shape[0]
    if mode == "none":
        return list(range(P))
    std = rewards.std(dim=1, unbiased=False)
    order = sorted(range(P), key=lambda g: (-std[g].item(), g))
    if mode == "top_ratio":
        k = max(1, math.ceil(ratio * P - 1e-9))
        return sorted(order[:k])
    if mode == "top_p":
        var = std**2
        total = var.sum().item()
        kept, covered = [], 0.0
        for g in order:
            if var[g].item() <= 1e-12 or covered >= top_p * total - 1e-12:
                break
            kept.append(g)
            covered += var[g].item()
        return sorted(kept)
    raise ValueError(f"unknown filter {mode!r}")
