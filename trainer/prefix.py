"""One forward pass over a micro-batch whose rows start with the same tokens, computing that prefix once.

A group's N trajectories begin with the same prompt (Bandit: ~200 prompt tokens before a ~20-token
reply), so a plain forward spends most of its work on N copies of one prefix. Here the prefix runs once
with the KV cache on, the cache is repeated N times, and only the rows' own continuations run on top
of it. Gradients flow back through the repeated cache into the one prefix computation, so the result
and its gradients equal the plain forward's (up to float rounding; tested). Rows of very different
lengths run in separate chunks (each recomputes the prefix once) instead of all padded to the longest.
"""

from __future__ import annotations

import inspect
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
    # at least one own token per row for the continuation
    shared = min(shared_prefix_len(ids, attention), min(lengths) - 1)
    # Gradient checkpointing runs without a KV cache. Decided per model, not per mode, so that old
    # log-probs (eval) and the training forward take the same path.
    if (
        ids.shape[0] == 1
        or shared < MIN_SHARED_TOKENS
        or getattr(model, "is_activation_checkpointing", False)
    ):
        return pick(model(input_ids=ids, attention_mask=attention, use_cache=False))
    out: torch.Tensor | None = None
    for rows in length_chunks(lengths, shared):
        length = max(lengths[i] for i in rows)
        index = torch.tensor(rows, device=ids.device)
        head = model(input_ids=ids[:1, :shared], attention_mask=attention[:1, :shared], use_cache=True)
        cache = cache_of(head)
        cache.batch_repeat_interleave(len(rows))
        tail = pick(
            model(
                input_ids=ids[index, shared:length],
                attention_mask=attention[index, :length],
                use_cache=True,
                **{cache_keyword(model): cache},
            )
        )
        first = pick(head)
        if out is None:
            out = tail.new_zeros((ids.shape[0], ids.shape[1], *tail.shape[2:]))
        out[index, :shared] = first  # broadcast over the chunk's rows; no per-row copy held alongside
        out[index, shared:length] = tail
    assert out is not None, "two or more rows make at least one chunk"
    return out


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
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
