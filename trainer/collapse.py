"""Template collapse (RAGEN-2, arXiv 2604.06268): does the reasoning still depend on the input?

Entropy can stay high while every prompt gets the same kind of reasoning. RAGEN-2 measures the input
dependence by in-batch cross-scoring: pair each sampled reasoning z_r with every prompt x_j of the
batch and ask the current policy how likely z_r is after x_j. When z_r is far likelier after its own
prompt than after the others, the reasoning is grounded in the input (mutual information I(X; Z) > 0);
when all prompts score it alike, it is a template (I(X; Z) ~ 0).

    X = the first-turn prompt, up to and including the `<think>` we open for the model;
    Z = the text the model wrote inside `<think>...</think>` on that turn (tags and special tokens
        stripped by the parser, re-tokenised); a trajectory with empty or unparsable Z is dropped.
    L[r, j] = mean log pi(z_r tokens | x_j)  (mean over z_r's tokens; the `_seq` key uses their sum)
    matched_r = L[r, own(r)],  marginal_r = logsumexp_j L[r, j] - log J  (J distinct prompts)

Two samplings, as RAGEN-2: the first-turn pairs above (keys `collapse/<name>`), and the trajectory
variant (keys `collapse/traj/<name>`, RAGEN-2's `collapse_trajectory_sample/<name>`): pick a trajectory
uniformly, then one of its turns uniformly, with replacement; X = the conversation up to and including
that turn's `<think>`, Z = that turn's reasoning. Later turns' prompts carry the earlier replies and
observations, so this asks whether the reasoning still depends on the state reached, not only on the
starting one.

Computed on the rollout batch before filtering (see `trainer/loop.py`). Fewer than 2 distinct prompts
(or no valid Z): no estimate that step for that sampling, so none of its keys rather than NaN, but its
valid_thinking_rate (0 when no reply reasons any more).
"""

from __future__ import annotations

import math
import random

import torch

from diagnostics.metrics import (
    COLLAPSE_CONDITIONAL_ENTROPY,
    COLLAPSE_MI_ESTIMATE,
    COLLAPSE_MI_ESTIMATE_SEQ,
    COLLAPSE_MI_ZSCORE,
    COLLAPSE_MI_ZSCORE_EMA,
    COLLAPSE_NUM_PROMPTS,
    COLLAPSE_NUM_SAMPLES,
    COLLAPSE_REASONING_ENTROPY,
    COLLAPSE_RETRIEVAL_ABOVE_CHANCE,
    COLLAPSE_RETRIEVAL_ACC,
    COLLAPSE_RETRIEVAL_CHANCE,
    COLLAPSE_VALID_THINKING_RATE,
    collapse_traj,
)
from trainer import prefix

EPS = 1e-3  # RAGEN-2's floor on the marginal's spread in the z-score


def pairs(trajs, chat, num_samples: int, rng: random.Random) -> tuple[list, float]:
    """Up to `num_samples` (x_ids, z_ids) pairs drawn without replacement, and the share of trajectories
    whose first turn has a non-empty Z (collapse/valid_thinking_rate)."""
    valid = []
    for t in trajs:
        think = t.turns[0]["think"] if t.turns else ""
        if not think:
            continue
        first_reply = t.mask.index(1) if 1 in t.mask else len(t.ids)
        valid.append((t.ids[:first_reply], chat.encode(think)))
    rate = len(valid) / len(trajs) if trajs else 0.0
    return rng.sample(valid, min(num_samples, len(valid))), rate


def reply_starts(mask: list[int]) -> list[int]:
    """Where each reply begins: the first token of every run of 1s in a trajectory's mask. Everything
    before a reply is its prompt context, ending with the `<think>` we open."""
    return [i for i, m in enumerate(mask) if m and (i == 0 or not mask[i - 1])]


def trajectory_pairs(trajs, chat, num_samples: int, rng: random.Random) -> tuple[list, list, float]:
    """The trajectory variant's draws: min(num_samples, valid turns) times, a trajectory uniformly among
    those with a turn of non-empty Z, then one of those turns uniformly (with replacement, as RAGEN-2).

    Returns the distinct (x_ids, z_ids) pairs drawn, for each draw the index of its pair (a pair drawn
    twice is scored once and counted twice), and the share of all turns with a non-empty Z."""
    candidates, turns = [], 0
    for t in trajs:
        turns += len(t.turns)
        valid = [
            (start, turn["think"]) for start, turn in zip(reply_starts(t.mask), t.turns) if turn["think"]
        ]
        if valid:
            candidates.append((t, valid))
    rate = sum(len(valid) for _, valid in candidates) / turns if turns else 0.0
    distinct: dict[tuple[int, int], int] = {}
    found: list[tuple[list[int], list[int]]] = []
    draws: list[int] = []
    for _ in range(min(num_samples, sum(len(valid) for _, valid in candidates))):
        m = rng.randrange(len(candidates))
        t, valid = candidates[m]
        k = rng.randrange(len(valid))
        if (m, k) not in distinct:
            start, think = valid[k]
            distinct[(m, k)] = len(found)
            found.append((t.ids[:start], chat.encode(think)))
        draws.append(distinct[(m, k)])
    return found, draws, rate


@torch.no_grad()
def cross_scores(
    model, prompts: list[list[int]], thoughts: list[list[int]], pad_id: int, micro_batch: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(L_mean, L_sum), each (R, J): log pi(thoughts[r] | prompts[j]), mean and sum over thought tokens.

    The R x J teacher-forced sequences run prompt by prompt, in micro-batches of `micro_batch` thoughts
    behind the same prompt, so each micro-batch computes its prompt once (trainer/prefix.py): a
    trajectory-variant prompt is a whole conversation, many times longer than the reasoning scored."""
    device = next(model.parameters()).device
    sums = torch.zeros(len(thoughts), len(prompts))
    for j, prompt in enumerate(prompts):
        for start in range(0, len(thoughts), micro_batch):
            rows = range(start, min(start + micro_batch, len(thoughts)))
            seqs = [prompt + thoughts[r] for r in rows]
            width = max(len(s) for s in seqs)
            ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
            attention = torch.zeros((len(seqs), width), dtype=torch.long)
            target = torch.zeros((len(seqs), width - 1), dtype=torch.bool)  # positions predicting z tokens
            for i, seq in enumerate(seqs):
                ids[i, : len(seq)] = torch.tensor(seq)
                attention[i, : len(seq)] = 1
                target[i, len(prompt) - 1 : len(seq) - 1] = True
            ids, attention, target = ids.to(device), attention.to(device), target.to(device)
            logits = prefix.forward(model, ids, attention, lambda out: out.logits)[:, :-1].float()
            logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
            sums[list(rows), j] = (logp * target).sum(-1).cpu()
    lengths = torch.tensor([len(z) for z in thoughts], dtype=torch.float32).unsqueeze(1)
    return sums / lengths, sums


def mi_metrics(scores: torch.Tensor, own: list[int], sigma_ema: float | None) -> tuple[dict, float]:
    """The collapse/* keys from one (R, J) score matrix; `own[r]` is the column of z_r's own prompt.

    Returns the metrics and the updated EMA of the marginal's spread (sigma_ema <- 0.9 sigma_ema + 0.1
    sigma; the first measurement starts it)."""
    R, J = scores.shape
    own_t = torch.tensor(own)
    matched = scores[torch.arange(R), own_t]
    marginal = torch.logsumexp(scores, dim=1) - math.log(J)
    sigma = marginal.std(unbiased=False).item() if R > 1 else 0.0
    sigma_ema = sigma if sigma_ema is None else 0.9 * sigma_ema + 0.1 * sigma
    gap = matched - marginal
    retrieval = (scores.argmax(dim=1) == own_t).float().mean().item()
    return {
        COLLAPSE_MI_ESTIMATE: (matched.mean() - marginal.mean()).item(),
        COLLAPSE_CONDITIONAL_ENTROPY: -matched.mean().item(),
        COLLAPSE_REASONING_ENTROPY: -marginal.mean().item(),
        COLLAPSE_RETRIEVAL_ACC: retrieval,
        COLLAPSE_RETRIEVAL_CHANCE: 1.0 / J,
        COLLAPSE_RETRIEVAL_ABOVE_CHANCE: retrieval - 1.0 / J,
        COLLAPSE_MI_ZSCORE: (gap / (sigma + EPS)).mean().item(),
        COLLAPSE_MI_ZSCORE_EMA: (gap / (sigma_ema + EPS)).mean().item(),
        COLLAPSE_NUM_PROMPTS: float(J),
        COLLAPSE_NUM_SAMPLES: float(R),
    }, sigma_ema


def estimate(
    sampled: list, draws: list[int], model, pad_id: int, micro_batch: int, sigma_ema: float | None
) -> tuple[dict, float | None]:
    """The collapse/* keys of one sampling: draw r is the pair `sampled[draws[r]]`; each distinct pair is
    scored once. {} (and the EMA unchanged) with fewer than 2 distinct prompts."""
    prompts = list(dict.fromkeys(tuple(x) for x, _ in sampled))
    if len(prompts) < 2:
        return {}, sigma_ema
    column = {x: j for j, x in enumerate(prompts)}
    thoughts = [z for _, z in sampled]
    means, sums = cross_scores(model, [list(x) for x in prompts], thoughts, pad_id, micro_batch)
    rows = torch.tensor(draws)
    own = [column[tuple(sampled[d][0])] for d in draws]
    metrics, sigma_ema = mi_metrics(means[rows], own, sigma_ema)
    metrics[COLLAPSE_MI_ESTIMATE_SEQ] = mi_metrics(sums[rows], own, None)[0][COLLAPSE_MI_ESTIMATE]
    return metrics, sigma_ema


class CollapseProbe:
    """Measures template collapse on a rollout batch: the first-turn sampling, and the trajectory sampling
    when traj_samples > 0; keeps each one's z-score EMA across steps (a resumed run starts them afresh)."""

    def __init__(self, num_samples: int, seed: int, traj_samples: int = 0):
        self.num_samples, self.seed, self.traj_samples = num_samples, seed, traj_samples
        self.sigma_ema: float | None = None
        self.traj_sigma_ema: float | None = None

    def measure(self, step: int, trajs, chat, model, pad_id: int, micro_batch: int) -> dict[str, float]:
        # Each sampling has its own random stream per step: measuring never shifts the training samples, a
        # resumed run draws the same pairs, and the first-turn draws do not depend on the trajectory ones.
        rng = random.Random(f"collapse:{self.seed}:{step}")
        sampled, rate = pairs(trajs, chat, self.num_samples, rng)
        metrics, self.sigma_ema = estimate(
            sampled, list(range(len(sampled))), model, pad_id, micro_batch, self.sigma_ema
        )
        # The rate on every measured step, estimate or not: the step where no reply reasons any more is the
        # one a reader of the chart must see (0.0), not a gap.
        metrics[COLLAPSE_VALID_THINKING_RATE] = rate
        if not self.traj_samples:
            return metrics
        traj_rng = random.Random(f"collapse-traj:{self.seed}:{step}")
        sampled, draws, rate = trajectory_pairs(trajs, chat, self.traj_samples, traj_rng)
        traj, self.traj_sigma_ema = estimate(sampled, draws, model, pad_id, micro_batch, self.traj_sigma_ema)
        traj[COLLAPSE_VALID_THINKING_RATE] = rate
        return {**metrics, **{collapse_traj(key): value for key, value in traj.items()}}
