"""One forward pass over a micro-batch whose rows start alike, computing each shared start once.

A group's N trajectories begin with the same prompt (Bandit: ~200 prompt tokens before a ~20-token
reply), so a plain forward spends most of its work on N copies of one prompt. Here the rows are split
into clusters that start alike (a micro-batch of several groups: one cluster per group, or one for all
when their prompts differ only at the end), each cluster's shared start runs once with the KV cache on,
the cache is repeated for the cluster's rows, and only the rows' own continuations run on top of it.
Gradients flow back through the repeated cache into the one prefix computation, so the result and its
gradients equal the plain forward's (up to float rounding; tested). Rows of very different lengths run in
separate chunks (each recomputes its prefix once) instead of all padded to the longest.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable

import torch

MIN_SHARED_TOKENS = 16  # below this the second call costs more than it saves


def shared_prefix_len(ids: torch.Tensor, attention: torch.Tensor) -> int:
    """How many leading tokens every row has in common (rows are right padded)."""
    same = (ids == ids[:1]).all(0) & attention.bool().all(0)
    return int(same.long().cumprod(0).sum())


def forward(model, ids: torch.Tensor, attention: torch.Tensor, pick: Callable) -> torch.Tensor:
    """pick(model output) for the whole (B, T) batch, e.g. pick = lambda out: out.logits. Positions past a
    row's end hold whatever its padding produced (callers read only positions inside the row)."""
    lengths = attention.sum(1).tolist()
    # Gradient checkpointing runs without a KV cache, and a repeated cache is only a plain one's equal
    # when every layer attends to the whole sequence. Decided per model, not per mode, so that old
    # log-probs (eval) and the training forward take the same path.
    cached = full_attention(model) and not getattr(model, "is_activation_checkpointing", False)
    clusters = prefix_clusters(ids, lengths) if cached else []
    if not clusters:
        return pick(model(input_ids=ids, attention_mask=attention, use_cache=False))
    chunks = [
        ([rows[i] for i in chunk], shared)
        for rows, shared in clusters
        for chunk in length_chunks([lengths[i] for i in rows], shared)
    ]
    alone = sorted(set(range(len(lengths))) - {i for rows, _ in clusters for i in rows})
    out: torch.Tensor | None = None
    for rows, shared in chunks + ([(alone, 0)] if alone else []):
        length = max(lengths[i] for i in rows)
        index = torch.tensor(rows, device=ids.device)
        on_top = {}  # the rows' own tokens run on top of their shared start's cache, if any
        if shared:
            head = model(
                input_ids=ids[index[:1], :shared],
                attention_mask=attention[index[:1], :shared],
                use_cache=True,
            )
            cache = cache_of(head)
            cache.batch_repeat_interleave(len(rows))
            on_top = {cache_keyword(model): cache}
        tail = pick(
            model(
                input_ids=ids[index, shared:length],
                attention_mask=attention[index, :length],
                use_cache=bool(shared),
                **on_top,
            )
        )
        if out is None:
            out = tail.new_zeros((ids.shape[0], ids.shape[1], *tail.shape[2:]))
        if shared:  # broadcast over the chunk's rows; no per-row copy held alongside
            out[index, :shared] = pick(head)
        out[index, shared:length] = tail
    assert out is not None
    return out


def prefix_clusters(ids: torch.Tensor, lengths: list[int]) -> list[tuple[list[int], int]]:
    """(rows, shared tokens) of the clusters worth a shared prefix; rows in none run plainly.

    Rows sorted by their tokens put rows that start alike next to each other; cutting that order wherever
    neighbours share fewer than c tokens gives one clustering per c. The one kept computes the fewest
    tokens: each cluster's shared start once, plus every row's own tokens. (A cluster's rows keep at least
    one own token each, for the continuation.)"""
    if len(lengths) < 2:
        return []
    rows = [row[:n] for row, n in zip(ids.tolist(), lengths)]
    order = sorted(range(len(rows)), key=rows.__getitem__)
    common = [
        next((k for k, (a, b) in enumerate(zip(rows[i], rows[j])) if a != b), min(lengths[i], lengths[j]))
        for i, j in zip(order, order[1:])
    ]

    def clusters_below(cut: float) -> list[tuple[list[int], int]]:
        found, start = [], 0
        for k in range(len(order)):
            if k == len(order) - 1 or common[k] < cut:
                members = order[start : k + 1]
                shared = min([*common[start:k], *(lengths[i] - 1 for i in members)])
                if len(members) > 1 and shared >= MIN_SHARED_TOKENS:
                    found.append((members, shared))
                start = k + 1
        return found

    def cost(found: list[tuple[list[int], int]]) -> int:
        return sum(lengths) - sum(shared * (len(members) - 1) for members, shared in found)

    return min((clusters_below(cut) for cut in [*sorted(set(common)), math.inf]), key=cost)


def length_chunks(lengths: list[int], shared: int) -> list[list[int]]:
    """Row indices in chunks of similar length, so that one long row (a multi-turn episode among
    one-turn ones) does not pad every row to its length: a chunk ends where a row's own tokens exceed
    twice (plus 16) those of the chunk's shortest row."""
    chunks: list[list[int]] = []
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if chunks and lengths[i] - shared <= 2 * (lengths[chunks[-1][0]] - shared) + 16:
            chunks[-1].append(i)
        else:
            chunks.append([i])
    return chunks


def cache_of(out):  # transformers >= 5.x names the KV cache `cache`, earlier versions `past_key_values`
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def cache_keyword(model) -> str:
    return "cache" if accepts(model, "cache") else "past_key_values"


def full_attention(model) -> bool:
    """Whether every layer attends to the whole sequence (no sliding window, no recurrent state)."""
    config = _base(model).config
    return all(
        kind == "full_attention" for kind in getattr(config, "layer_types", None) or ["full_attention"]
    )


def accepts(model, keyword: str) -> bool:
    """Whether the (base) model's forward takes `keyword`."""
    base = type(_base(model))
    if base not in _FORWARD_PARAMETERS:  # asked every decode step: inspect once per model class
        _FORWARD_PARAMETERS[base] = frozenset(inspect.signature(base.forward).parameters)
    return keyword in _FORWARD_PARAMETERS[base]


_FORWARD_PARAMETERS: dict[type, frozenset[str]] = {}


def _base(model):
    """The model under a PEFT wrapper (LoRA), or the model itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model
