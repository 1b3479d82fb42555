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

Computed on the rollout batch before filtering (see `trainer/loop.py`). Fewer than 2 distinct prompts
(or no valid Z): no estimate that step, so no `collapse/*` keys rather than NaN.
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
)

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


@torch.no_grad()
def cross_scores(
    model, prompts: list[list[int]], thoughts: list[list[int]], pad_id: int, micro_batch: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """(L_mean, L_sum), each (R, J): log pi(thoughts[r] | prompts[j]), mean and sum over thought tokens.

    All R x J teacher-forced sequences run in micro-batches of `micro_batch` rows, right padded."""
    device = next(model.parameters()).device
    rows = [(r, j) for r in range(len(thoughts)) for j in range(len(prompts))]
    sums = torch.zeros(len(thoughts), len(prompts))
    for start in range(0, len(rows), micro_batch):
        chunk = rows[start : start + micro_batch]
        seqs = [prompts[j] + thoughts[r] for r, j in chunk]
        width = max(len(s) for s in seqs)
        ids = torch.full((len(seqs), width), pad_id, dtype=torch.long)
        attention = torch.zeros((len(seqs), width), dtype=torch.long)
        target = torch.zeros((len(seqs), width - 1), dtype=torch.bool)  # positions predicting a z token
        for i, ((_, j), seq) in enumerate(zip(chunk, seqs)):
            ids[i, : len(seq)] = torch.tensor(seq)
            attention[i, : len(seq)] = 1
            target[i, len(prompts[j]) - 1 : len(seq) - 1] = True
        ids, attention, target = ids.to(device), attention.to(device), target.to(device)
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
        logp = torch.log_softmax(logits, dim=-1).gather(-1, ids[:, 1:].unsqueeze(-1)).squeeze(-1)
        per_row = (logp * target).sum(-1).cpu()
        for (r, j), total in zip(chunk, per_row.tolist()):
            sums[r, j] = total
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


class CollapseProbe:
    """Measures template collapse on a rollout batch; keeps the z-score's EMA across steps (a resumed run
    starts it afresh)."""

    def __init__(self, num_samples: int, seed: int):
        self.num_samples, self.seed = num_samples, seed
        self.sigma_ema: float | None = None

    def measure(self, step: int, trajs, chat, model, pad_id: int, micro_batch: int) -> dict[str, float]:
        # Its own random stream per step: measuring never shifts the training samples, and a resumed run
        # draws the same pairs.
        rng = random.Random(f"collapse:{self.seed}:{step}")
        sampled, rate = pairs(trajs, chat, self.num_samples, rng)
        prompts = list(dict.fromkeys(tuple(x) for x, _ in sampled))
        if len(prompts) < 2:
            return {}
        column = {x: j for j, x in enumerate(prompts)}
        thoughts = [z for _, z in sampled]
        means, sums = cross_scores(model, [list(x) for x in prompts], thoughts, pad_id, micro_batch)
        own = [column[tuple(x)] for x, _ in sampled]
        metrics, self.sigma_ema = mi_metrics(means, own, self.sigma_ema)
        metrics[COLLAPSE_MI_ESTIMATE_SEQ] = mi_metrics(sums, own, None)[0][COLLAPSE_MI_ESTIMATE]
        metrics[COLLAPSE_VALID_THINKING_RATE] = rate
        return metrics
