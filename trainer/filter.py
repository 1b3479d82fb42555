"""StarPO-S / RAGEN-2 rollout filtering: keep whole groups whose RAW rewards (incl. format penalty) vary most.

The rules are RAGEN-2's (`ragen/trainer/rollout_filter.py` in mll-lab-nu/RAGEN, filter type "largest",
metric "reward_variance"): a group's score is the unbiased std of its trajectory rewards; with
include_zero=False groups scoring <= 1e-10 are no candidates. Ties are broken by the lower group index.
"""

from __future__ import annotations

import torch

ZERO_SCORE = 1e-10  # a group scoring at most this has no reward spread
SELECTION_EPS = 0.01  # linear top-p: the threshold is top_p * sum(scores) - SELECTION_EPS


def group_scores(rewards: torch.Tensor) -> torch.Tensor:
    """(P, N) raw trajectory rewards -> (P,) unbiased in-group std, as RAGEN."""
    return rewards.float().std(dim=1)


def zero_groups(rewards: torch.Tensor) -> int:
    """Groups without reward spread (RAGEN's filter_zero_count)."""
    return int((group_scores(rewards).abs() <= ZERO_SCORE).sum().item())


def most_kept(groups: int, mode: str, value: float = 1.0) -> int:
    """The most groups keep_groups can keep of `groups`: top_ratio and top_k_abs keep a fixed count (at least
    1), the other rules up to every group, depending on the rewards."""
    if mode == "top_ratio":
        count = int(value * groups)
    elif mode == "top_k_abs":
        count = int(value)
    else:
        return groups
    return max(1, min(count, groups))


def keep_groups(
    rewards: torch.Tensor,
    mode: str,
    value: float = 1.0,
    include_zero: bool = True,
    top_p_mode: str = "linear",
) -> list[int]:
    """rewards: (P, N). Returns the kept group indices, ascending; [] means the step has nothing to train on.

    top_ratio: the int(value * P) best groups (at least 1); top_k_abs: the int(value) best (at least 1);
    top_p linear: best groups while their running score sum is below value * sum - 0.01, and none when that
    threshold is not reached; top_p softmax: the smallest prefix whose softmax(score) mass reaches value;
    min_p: groups scoring >= value * best score. top_p with value >= 1 keeps every candidate.
    """
    P = rewards.shape[0]
    if mode == "none":
        return list(range(P))
    scores = group_scores(rewards)
    candidates = torch.arange(P)
    if not include_zero:
        candidates = candidates[scores.abs() > ZERO_SCORE]
        if candidates.numel() == 0:
            return []
    cand_scores = scores[candidates]
    order = torch.sort(cand_scores, descending=True, stable=True).indices  # stable: lower index first on ties
    ranked, ranked_scores = candidates[order], cand_scores[order]
    if mode in ("top_ratio", "top_k_abs"):
        return sorted(ranked[: min(most_kept(P, mode, value), ranked.numel())].tolist())
    if mode == "top_p":
        if value >= 1.0:
            return sorted(candidates.tolist())
        if top_p_mode == "softmax":
            cumulative = torch.cumsum(torch.softmax(ranked_scores, dim=0), dim=0)
            k = min(int(torch.searchsorted(cumulative, torch.tensor(value)).item()) + 1, ranked.numel())
            return sorted(ranked[:k].tolist())
        if top_p_mode == "linear":
            threshold = value * cand_scores.sum() - SELECTION_EPS
            covered, kept = 0.0, []
            for g, score in zip(ranked.tolist(), ranked_scores.tolist()):
                if covered >= threshold or score <= 0:
                    break
                covered += score
                kept.append(g)
            return sorted(kept) if covered >= threshold else []
        raise ValueError(f"unknown top-p mode {top_p_mode!r}")
    if mode == "min_p":
        return sorted(candidates[cand_scores >= cand_scores.max() * value - ZERO_SCORE].tolist())
    raise ValueError(f"unknown filter {mode!r}")
