"""The shared-prefix forward equals the plain forward, values and gradients, for the policy and critic."""

import pytest
import torch

from trainer import prefix
from trainer.config import ModelConfig
from trainer.models import load_policy


@pytest.fixture(scope="module")
def policy(tiny_model_dir):
    torch.manual_seed(0)
    return load_policy(ModelConfig(), with_critic=True, with_reference=False)


def group_batch(vocab: int, shared: int = 40, rows: int = 5):
    """Rows that share `shared` tokens, then differ and end at different lengths (right padded)."""
    g = torch.Generator().manual_seed(1)
    head = torch.randint(3, vocab, (shared,), generator=g)
    ids = torch.zeros((rows, shared + 40), dtype=torch.long)
    attention = torch.zeros_like(ids)
    for i, tail_len in enumerate([12, 7, 9, 3, 40][:rows]):
        ids[i, :shared] = head
        ids[i, shared : shared + tail_len] = torch.randint(3, vocab, (tail_len,), generator=g)
        attention[i, : shared + tail_len] = 1
    return ids, attention


def two_groups_and_a_stranger(vocab: int, common: int = 10, own: int = 40, rows: int = 4):
    """Two groups of rows whose prompts share `common` tokens and then `own` tokens of their group, each row
    with a reply of its own; and one unrelated row (right padded)."""
    g = torch.Generator().manual_seed(2)
    start = torch.randint(3, vocab, (common,), generator=g)
    prompts = [torch.cat([start, torch.randint(3, vocab, (own,), generator=g)]) for _ in range(2)]
    lines = [
        torch.cat([p, torch.randint(3, vocab, (5 + i,), generator=g)]) for p in prompts for i in range(rows)
    ]
    lines.append(torch.randint(3, vocab, (30,), generator=g))
    ids = torch.zeros((len(lines), max(map(len, lines))), dtype=torch.long)
    attention = torch.zeros_like(ids)
    for i, line in enumerate(lines):
        ids[i, : len(line)], attention[i, : len(line)] = line, 1
    return ids, attention


def test_shared_prefix_length_stops_at_the_first_difference_or_padding():
    ids = torch.tensor([[5, 6, 7, 8], [5, 6, 7, 9], [5, 6, 7, 8]])
    assert prefix.shared_prefix_len(ids, torch.ones_like(ids)) == 3
    assert prefix.shared_prefix_len(ids, torch.tensor([[1, 1, 0, 0]] * 3)) == 2


@pytest.mark.parametrize("batch", [group_batch, two_groups_and_a_stranger])
@pytest.mark.parametrize("module", ["model", "critic"])
def test_shared_prefix_forward_equals_the_plain_forward(policy, module, batch):
    ids, attention = batch(policy.tokenizer.vocab_size if module == "model" else 500)
    net = policy.model if module == "model" else policy.critic.backbone
    pick = (lambda out: out.logits) if module == "model" else (lambda out: out.last_hidden_state)
    net.train()
    results = []
    for forward in (
        lambda: pick(net(input_ids=ids, attention_mask=attention, use_cache=False)),
        lambda: prefix.forward(net, ids, attention, pick),
    ):
        net.zero_grad(set_to_none=True)
        out = forward()
        (out * attention.unsqueeze(-1)).square().mean().backward()
        grads = [p.grad.clone() for p in net.parameters() if p.grad is not None]
        results.append((out.detach(), grads))
    (plain, plain_grads), (shared, shared_grads) = results
    real = attention.bool()
    assert torch.allclose(plain[real], shared[real], atol=1e-5)
    assert len(plain_grads) == len(shared_grads) > 0
    for a, b in zip(plain_grads, shared_grads):
        assert torch.allclose(a, b, atol=1e-6, rtol=1e-4)


def test_the_prefix_runs_once_per_length_chunk(policy):
    ids, attention = group_batch(policy.tokenizer.vocab_size)
    seen = []
    hook = policy.model.register_forward_pre_hook(
        lambda _, args, kwargs: seen.append(kwargs["input_ids"].shape), with_kwargs=True
    )
    try:
        prefix.forward(policy.model, ids, attention, lambda out: out.logits)
    finally:
        hook.remove()
    assert seen == [torch.Size([1, 40]), torch.Size([4, 12]), torch.Size([1, 40]), torch.Size([1, 40])]


def test_rows_of_very_different_lengths_run_in_separate_chunks():
    assert prefix.length_chunks([100 + 5, 100 + 300, 100 + 20, 100 + 250], shared=100) == [[0, 2], [3, 1]]


def test_each_group_computes_its_own_prompt_once_and_an_unrelated_row_runs_plainly(policy):
    ids, attention = two_groups_and_a_stranger(policy.tokenizer.vocab_size)
    clusters = prefix.prefix_clusters(ids, attention.sum(1).tolist())
    assert sorted((sorted(rows), shared) for rows, shared in clusters) == [
        ([0, 1, 2, 3], 50),
        ([4, 5, 6, 7], 50),
    ]
    seen = []
    hook = policy.model.register_forward_pre_hook(
        lambda _, args, kwargs: seen.append(tuple(kwargs["input_ids"].shape)), with_kwargs=True
    )
    try:
        prefix.forward(policy.model, ids, attention, lambda out: out.logits)
    finally:
        hook.remove()
    assert sorted(seen) == [(1, 30), (1, 50), (1, 50), (4, 8), (4, 8)]


def test_prompts_that_differ_only_at_their_end_share_their_common_start_instead():
    ids, attention = two_groups_and_a_stranger(1000, common=60, own=2)
    clusters = prefix.prefix_clusters(ids, attention.sum(1).tolist())
    assert [(sorted(rows), shared) for rows, shared in clusters] == [(list(range(8)), 60)]


def test_only_models_whose_layers_all_see_the_whole_sequence_share_a_cache():
    from types import SimpleNamespace

    from transformers import Qwen2Config

    def model(**config):
        return SimpleNamespace(config=Qwen2Config(num_hidden_layers=3, **config))

    assert prefix.full_attention(model())
    assert not prefix.full_attention(model(use_sliding_window=True, sliding_window=64, max_window_layers=1))
