"""Template collapse (trainer/collapse.py): the maths on hand-computed matrices, the teacher-forced scores
against a one-sequence forward, pair sampling, and the loop's schedule."""

import json
import math
import os
import random

import pytest
import torch

from trainer import collapse
from trainer.collapse import CollapseProbe, cross_scores, mi_metrics
from trainer.config import TrainConfig
from trainer.loop import Trainer, entropy_adv_cov, train
from trainer.rollout import Trajectory
from trainer.sink import JsonlSink


def test_mi_metrics_on_a_hand_computed_matrix():
    # Three reasonings, two prompts; z_0 and z_2 came from prompt 0, z_1 from prompt 1.
    scores = torch.tensor([[-1.0, -3.0], [-3.0, -1.0], [-2.5, -2.0]])
    found, sigma_ema = mi_metrics(scores, own=[0, 1, 0], sigma_ema=None)
    # matched = [-1, -1, -2.5]; marginal_r = log(e^a + e^b) - log 2:
    m01 = -1 + math.log(1 + math.exp(-2)) - math.log(2)  # rows 0 and 1: -1.566219
    m2 = -2 + math.log(1 + math.exp(-0.5)) - math.log(2)  # row 2: -2.219944
    matched, marginal = [-1.0, -1.0, -2.5], [m01, m01, m2]
    assert found["collapse/mi_estimate"] == pytest.approx(sum(matched) / 3 - sum(marginal) / 3)
    assert found["collapse/conditional_entropy"] == pytest.approx(4.5 / 3)
    assert found["collapse/reasoning_entropy"] == pytest.approx(-(2 * m01 + m2) / 3)
    assert found["collapse/retrieval_acc"] == pytest.approx(2 / 3)  # z_2 scores higher under prompt 1
    assert found["collapse/retrieval_chance"] == pytest.approx(1 / 2)
    assert found["collapse/retrieval_above_chance"] == pytest.approx(2 / 3 - 1 / 2)
    mean = sum(marginal) / 3
    sigma = math.sqrt(sum((m - mean) ** 2 for m in marginal) / 3)  # population SD of the marginals
    gaps = [a - b for a, b in zip(matched, marginal)]
    assert sigma_ema == pytest.approx(sigma)
    assert found["collapse/mi_zscore"] == pytest.approx(sum(g / (sigma + 1e-3) for g in gaps) / 3)
    assert found["collapse/mi_zscore_ema"] == pytest.approx(found["collapse/mi_zscore"])
    assert found["collapse/num_prompts"] == 2 and found["collapse/num_samples"] == 3


def test_a_template_has_zero_mi_and_a_grounded_reasoning_reaches_log_n():
    template = torch.tensor([[-2.0, -2.0, -2.0], [-1.0, -1.0, -1.0]])  # every prompt scores z alike
    found, _ = mi_metrics(template, own=[0, 2], sigma_ema=None)
    assert found["collapse/mi_estimate"] == pytest.approx(0.0, abs=1e-6)
    assert found["collapse/mi_zscore"] == pytest.approx(0.0, abs=1e-6)
    grounded = torch.tensor([[0.0, -1e4, -1e4], [-1e4, 0.0, -1e4], [-1e4, -1e4, 0.0]])
    found, _ = mi_metrics(grounded, own=[0, 1, 2], sigma_ema=None)
    assert found["collapse/mi_estimate"] == pytest.approx(math.log(3))  # the upper bound log N
    assert found["collapse/retrieval_acc"] == 1.0


def test_the_z_score_ema_moves_a_tenth_of_the_way():
    first = torch.tensor([[-1.0, -3.0], [-3.0, -3.0]])
    second = torch.tensor([[-1.0, -5.0], [-6.0, -2.0]])
    _, sigma_1 = mi_metrics(first, [0, 1], None)
    found, sigma_ema = mi_metrics(second, [0, 1], sigma_1)
    _, sigma_2 = mi_metrics(second, [0, 1], None)
    assert sigma_ema == pytest.approx(0.9 * sigma_1 + 0.1 * sigma_2)
    assert found["collapse/mi_zscore_ema"] != pytest.approx(found["collapse/mi_zscore"])


@pytest.fixture(scope="module")
def tiny(tiny_model_dir):
    return Trainer(TrainConfig.preset("starpo-s", env={"name": "bandit"}))


def test_cross_scores_equal_a_one_sequence_forward_at_any_micro_batch(tiny):
    model, chat = tiny.policy.model, tiny.chat
    prompts = [chat.first_prompt("Pick an arm: Dragon or Phoenix."), chat.first_prompt("Push the box left.")]
    thoughts = [chat.encode("the dragon pays more"), chat.encode("left then up"), chat.encode("hmm")]
    means, sums = cross_scores(model, prompts, thoughts, tiny.pad_id, micro_batch=4)
    means_1, _ = cross_scores(model, prompts, thoughts, tiny.pad_id, micro_batch=1)
    assert torch.allclose(means, means_1, atol=1e-5)
    for r, z in enumerate(thoughts):
        for j, x in enumerate(prompts):
            ids = torch.tensor([x + z])
            with torch.no_grad():
                logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].float(), -1)
            expected = sum(logp[len(x) - 1 + i, t].item() for i, t in enumerate(z))
            assert sums[r, j].item() == pytest.approx(expected, abs=1e-3)
            assert means[r, j].item() == pytest.approx(expected / len(z), abs=1e-4)


def trajectory(chat, group, user, think):
    prompt = chat.first_prompt(user)
    reply = chat.encode(f" {think} </think> <answer> Dragon </answer>")
    return Trajectory(
        group=group,
        seed=group,
        ids=prompt + reply,
        mask=[0] * len(prompt) + [1] * len(reply),
        turns=[{"think": think, "answer": "Dragon"}],
    )


def test_pairs_take_the_prompt_through_think_and_drop_empty_reasoning(tiny):
    chat = tiny.chat
    trajs = [trajectory(chat, 0, "a", "go"), trajectory(chat, 0, "a", ""), trajectory(chat, 1, "b", "stay")]
    sampled, rate = collapse.pairs(trajs, chat, num_samples=64, rng=random.Random(0))
    assert rate == pytest.approx(2 / 3)
    assert sorted(z for _, z in sampled) == sorted([chat.encode("go"), chat.encode("stay")])
    think_id = chat.encode("<think>")[-1]
    assert all(x[-1] == think_id for x, _ in sampled)


def test_fewer_than_two_distinct_prompts_is_skipped_not_nan(tiny):
    chat = tiny.chat
    probe = CollapseProbe(num_samples=64, seed=0)
    same_prompt = [trajectory(chat, 0, "a", "go"), trajectory(chat, 0, "a", "stay")]
    assert probe.measure(0, same_prompt, chat, tiny.policy.model, tiny.pad_id, 8) == {}
    two = same_prompt + [trajectory(chat, 1, "b", "left")]
    found = probe.measure(0, two, chat, tiny.policy.model, tiny.pad_id, 8)
    assert found["collapse/num_prompts"] == 2 and all(math.isfinite(v) for v in found.values())


@pytest.mark.parametrize("every,measured", [(0, []), (2, [0, 2])])
def test_the_loop_measures_at_the_first_step_and_every_n(tiny_model_dir, tmp_path, every, measured):
    cfg = TrainConfig.preset(
        "grpo",
        env={"name": "bandit"},
        rollout={"env_groups": 2, "group_size": 2, "max_turns": 1, "max_new_tokens": 24},
        optim={"mini_batch_size": 4, "micro_batch_size": 2},
        schedule={"steps": 3, "val_every": 0, "checkpoint_every": 0},
        diagnostics={"collapse_every": every},
    )
    with open(os.devnull, "w") as quiet:
        train(cfg, JsonlSink(str(tmp_path), cfg.to_yaml(), stream=quiet), str(tmp_path))
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows if "time/collapse_s" in r] == measured
    assert all(math.isfinite(r["actor/entropy_adv_cov"]) for r in rows)


def test_collapse_settings_are_validated():
    from trainer.config import ConfigError

    with pytest.raises(ConfigError) as error:
        TrainConfig.from_dict({"diagnostics": {"collapse_every": -1, "collapse_samples": 1}})
    assert set(error.value.errors) == {"diagnostics.collapse_every", "diagnostics.collapse_samples"}


def test_entropy_adv_cov_on_hand_computed_tokens():
    # Response tokens only: A = [1, 2, -1], log pi = [-1, -3, -2]; means 2/3 and -2.
    advs = [torch.tensor([[1.0, 2.0, 9.0]]), torch.tensor([[-1.0, 9.0]])]
    logps = [torch.tensor([[-1.0, -3.0, 5.0]]), torch.tensor([[-2.0, 5.0]])]
    masks = [torch.tensor([[1.0, 1.0, 0.0]]), torch.tensor([[1.0, 0.0]])]
    expected = ((1 / 3) * 1 + (4 / 3) * (-1) + (-5 / 3) * 0) / 3
    assert entropy_adv_cov(advs, logps, masks) == pytest.approx(expected)
