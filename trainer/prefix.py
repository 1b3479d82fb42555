"""One forward pass over a micro-batch whose rows start with the same tokens, computing that prefix once.

A group's N trajectories begin with the same prompt (Bandit: ~200 prompt tokens before a ~20-token
reply), so a plain forward spends most of its work on N copies of one prefix. Here the prefix runs once
with the KV cache on, the cache is repeated N times, and only the rows' own continuations run on top
of it. Gradients flow back through the repeated cache into the one prefix computation, so the result
and its gradients equal the plain forward's (up to float rounding; tested).
"""
from __future__ import annotations

import inspect
from typing import Callable

import torch

MIN_SHARED_TOKENS = 16  # below this the second call costs more than it saves


def shared_prefix_len(ids: torch.Tensor, attention: torch.Tensor) -> int:
    """How many leading tokens every row has in common (rows are right padded)."""
    same = (ids == ids[:1]).all(0) & attention.bool().all(0)
    return int(same.long().cumprod(0).sum())


def forward(model, ids: torch.Tensor, attention: torch.Tensor, pick: Callable) -> torch.Tensor:
    """pick(model output) for the whole (B, T) batch, e.g. pick = lambda out: out.logits."""
    shared = min(shared_prefix_len(ids, attention), ids.shape[1] - 1)
    checkpointing = model.training and getattr(model, "is_activation_checkpointing", False)  # no cache then
    if ids.shape[0] == 1 or shared < MIN_SHARED_TOKENS or checkpointing:
        return pick(model(input_ids=ids, attention_mask=attention, use_cache=False))
    head = model(input_ids=ids[:1, :shared], attention_mask=attention[:1, :shared], use_cache=True)
    cache = cache_of(head)
    cache.batch_repeat_interleave(ids.shape[0])
    tail = model(input_ids=ids[:, shared:], attention_mask=attention, use_cache=True, **{cache_keyword(model): cache})
    first = pick(head)
    return torch.cat([first.expand(ids.shape[0], *first.shape[1:]), pick(tail)], dim=1)


def cache_of(out):  # transformers >= 5.x names the KV cache `cache`, earlier versions `past_key_values`
    cache = getattr(out, "cache", None)
    return cache if cache is not None else out.past_key_values


def cache_keyword(model) -> str:
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    return "cache" if "cache" in inspect.signature(base.forward).parameters else "past_key_values"
