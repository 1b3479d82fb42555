"""The update math against hand-computed values."""

import math

import pytest
import torch

from trainer import advantages as A
from trainer import losses
from trainer.filter import keep_groups
from trainer.loop import optimizer_step


def test_gae_skips_masked_observation_tokens():
    # two assistant turns (positions 0-1 and 4-5) around observation tokens 2-3 whose values are junk
    mask = torch.tensor([[1, 1, 0, 0, 1, 1]], dtype=torch.float32)
    values = torch.tensor([[0.5, 0.6, 9.0, 9.0, 0.2, 0.4]])
    rewards = A.token_rewards(torch.tensor([1.0]), mask)
    assert rewards.tolist() == [[0, 0, 0, 0, 0, 1.0]]
    adv, ret = A.gae(rewards, values, mask, gamma=1.0, lam=1.0)
    assert adv[0].tolist() == pytest.approx([0.5, 0.4, 0, 0, 0.8, 0.6])  # A_t = R - V_t
    assert ret[0].tolist() == pytest.approx([1, 1, 0, 0, 1, 1])
    adv, _ = A.gae(rewards, values, mask, gamma=0.5, lam=1.0)
    # p5: 1 - .4 = .6; p4: .5*.4 - .2 + .5*.6 = .3; p1: .5*.2 - .6 + .5*.3 = -.35; p0: .5*.6 - .5 + .5*-.35
    assert adv[0].tolist() == pytest.approx([-0.375, -0.35, 0, 0, 0.3, 0.6])


def test_grpo_normalises_per_group_and_zero_std_groups_get_zero():
    rewards = torch.tensor([1.0, 0.0, 0.0, 1.0, 0.5, 0.5, 0.5, 0.5])
    groups = torch.tensor([0, 0, 0, 0, 1, 1, 1, 1])
    adv = A.group_advantages(rewards, groups, "grpo")
    s = 0.5 / math.sqrt(1 / 3)  # unbiased std of [1, 0, 0, 1] is sqrt(1/3)
    assert adv.tolist() == pytest.approx([s, -s, -s, s, 0, 0, 0, 0], abs=1e-5)
    assert A.group_advantages(rewards, groups, "drgrpo").tolist() == pytest.approx(
        [0.5, -0.5, -0.5, 0.5, 0, 0, 0, 0]
    )


def test_whiten_over_masked_tokens_only():
    x = torch.tensor([[1.0, 3.0, 100.0]])
    [out] = A.whiten([x], [torch.tensor([[1.0, 1.0, 0.0]])])
    assert out[0].tolist() == pytest.approx([-1 / math.sqrt(2), 1 / math.sqrt(2), 0], abs=1e-6)


RAW = torch.tensor(
    [
        [0.0, 0.0, 0.0, 0.0],  # std 0
        [1.0, 0.0, 1.0, 0.0],  # unbiased std sqrt(1/3) = .5774
        [1.0, 1.0, 1.0, 0.9],  # .05
        [-0.1, 1.0, -0.1, -0.1],  # format penalties: .55
    ]
)


def test_filter_top_ratio_picks_highest_raw_std_groups():
    assert keep_groups(RAW, "top_ratio", 0.25) == [1]
    assert keep_groups(RAW, "top_ratio", 0.5) == [1, 3]
    assert keep_groups(RAW, "top_ratio", 0.75) == [1, 2, 3]
    assert keep_groups(RAW, "none") == [0, 1, 2, 3]


def test_filter_top_p_keeps_the_groups_covering_the_summed_std():
    # unbiased stds 0, .5774, .05, .55: tau = .9 * 1.1774 - .01 = 1.0496; .5774 + .55 = 1.1274 >= tau
    assert keep_groups(RAW, "top_p", 0.9) == [1, 3]
    assert keep_groups(RAW, "top_p", 0.4) == [1]  # tau = .4610: .5774 alone
    assert keep_groups(RAW, "top_p", 1.0, include_zero=False) == [1, 2, 3]


CLIP_CASE = dict(ratio=[1.5, 1.25, 0.7, 5.0], adv=[1.0, 1.0, -1.0, -1.0])


def _clip_loss(dual_clip):
    ratio, adv = torch.tensor([CLIP_CASE["ratio"]]), torch.tensor([CLIP_CASE["adv"]])
    old = torch.zeros_like(ratio)
    return losses.policy_loss(
        ratio.log(), old, adv, torch.ones_like(ratio), 0.2, 0.28, dual_clip, "token-mean"
    )


def test_clipped_loss_asymmetric_eps_and_dual_clip():
    # per token: -1.28 (clipped at 1+.28), -1.25 (inside), .8 (clipped at 1-.2), 5 -> dual-clip 3
    loss, stats = _clip_loss(3.0)
    assert loss.item() == pytest.approx((-1.28 - 1.25 + 0.8 + 3.0) / 4)
    assert stats["clip_frac"] == pytest.approx(0.5)
    assert stats["clip_frac_high"] == pytest.approx(0.25)
    loss, _ = _clip_loss(0.0)
    assert loss.item() == pytest.approx((-1.28 - 1.25 + 0.8 + 5.0) / 4)


def test_kl_estimators():
    logp, ref = torch.tensor([math.log(0.5)]), torch.tensor([math.log(0.25)])
    assert losses.kl_penalty(logp, ref, "k1").item() == pytest.approx(math.log(2))
    assert losses.kl_penalty(logp, ref, "k3").item() == pytest.approx(0.5 - 1 + math.log(2))
    assert losses.kl_penalty(ref, ref, "k3").item() == 0.0


def test_aggregation_modes_and_micro_batch_additivity():
    x = torch.tensor([[1.0, 2.0, 3.0, 7.0], [4.0, 9.0, 9.0, 9.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 0.0]])
    expected = {"token-mean": 10 / 4, "seq-mean-token-mean": (2 + 4) / 2, "seq-mean-token-sum": (6 + 4) / 2}
    for mode, value in expected.items():
        assert losses.aggregate(x, mask, mode).item() == pytest.approx(value)
        split = sum(
            losses.aggregate(x[i : i + 1], mask[i : i + 1], mode, n_seqs=2, n_tokens=4) for i in range(2)
        )
        assert split.item() == pytest.approx(value)


def test_value_loss_clips_and_explained_variance():
    v, old, ret, m = torch.tensor([[2.0]]), torch.tensor([[0.0]]), torch.tensor([[2.0]]), torch.ones(1, 1)
    assert losses.value_loss(v, old, ret, m, clip=0.5).item() == pytest.approx(0.5 * 1.5**2)
    r = torch.tensor([1.0, 2.0, 3.0])
    assert losses.explained_variance(r, r, torch.ones(3)) == pytest.approx(1.0)
    assert losses.explained_variance(torch.zeros(3), r, torch.ones(3)) == pytest.approx(0.0)
    # Every trajectory the same reward, as float32 arithmetic leaves it (a collapsed batch): nothing to
    # explain, not -1e13.
    same = (torch.full((64,), 0.1) * 3).cumsum(0) / torch.arange(1, 65) / 3
    assert 0 < same.var() < 1e-12
    assert losses.explained_variance(torch.linspace(-1, 1, 64), same, torch.ones(64)) == 0.0


def test_non_finite_gradient_skips_the_step():
    layer = torch.nn.Linear(2, 1)
    before = [p.detach().clone() for p in layer.parameters()]
    opt = torch.optim.AdamW(layer.parameters(), lr=0.1)
    (layer(torch.ones(1, 2)).sum() * float("nan")).backward()
    norm, skipped = optimizer_step(list(layer.parameters()), opt, 1.0)
    assert skipped and not math.isfinite(norm)
    assert all(torch.equal(a, b) for a, b in zip(before, layer.parameters()))
    layer(torch.ones(1, 2)).sum().backward()
    _, skipped = optimizer_step(list(layer.parameters()), opt, 1.0)
    assert not skipped and not all(torch.equal(a, b) for a, b in zip(before, layer.parameters()))


def test_jsonl_sink_replaces_steps_logged_again(tmp_path):
    import io
    import json

    from trainer.sink import JsonlSink

    sink = JsonlSink(str(tmp_path), "seed: 0\n", stream=io.StringIO())
    for step in range(3):
        sink.metrics(step, {"train/success": step / 10})
    resumed = JsonlSink(str(tmp_path), stream=io.StringIO())
    resumed.metrics(1, {"train/success": 0.5})
    resumed.metrics(2, {"train/success": float("nan")})
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert rows == [
        {"step": 0, "train/success": 0.0},
        {"step": 1, "train/success": 0.5},
        {"step": 2, "train/success": None},
    ]


def test_jsonl_sink_keeps_a_steps_record_whole_and_replaces_it_when_logged_again(tmp_path):
    import io
    import json

    from trainer.sink import JsonlSink

    sink = JsonlSink(str(tmp_path), "seed: 0\n", stream=io.StringIO())
    sink.records(0, "train/reward_std_hist", [0.5, 0.0])
    sink.records(1, "train/reward_std_hist", [0.25, 0.75])
    resumed = JsonlSink(str(tmp_path), stream=io.StringIO())
    resumed.records(1, "train/reward_std_hist", [float("nan"), 0.1])
    rows = [json.loads(line) for line in open(tmp_path / "records.jsonl")]
    assert rows == [
        {"step": 0, "key": "train/reward_std_hist", "values": [0.5, 0.0]},
        {"step": 1, "key": "train/reward_std_hist", "values": [None, 0.1]},
    ]
