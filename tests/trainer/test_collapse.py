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
from trainer.config import ConfigError, TrainConfig
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
    # no estimate, but the rate (every reply reasons here)
    assert probe.measure(0, same_prompt, chat, tiny.policy.model, tiny.pad_id, 8) == {
        "collapse/valid_thinking_rate": 1.0
    }
    silent = [trajectory(chat, 0, "a", ""), trajectory(chat, 1, "b", "")]  # no reply reasons any more
    assert probe.measure(5, silent, chat, tiny.policy.model, tiny.pad_id, 8) == {
        "collapse/valid_thinking_rate": 0.0
    }
    two = same_prompt + [trajectory(chat, 1, "b", "left")]
    found = probe.measure(0, two, chat, tiny.policy.model, tiny.pad_id, 8)
    assert found["collapse/num_prompts"] == 2 and all(math.isfinite(v) for v in found.values())


def conversation(chat, group, user, thinks):
    """A multi-turn trajectory: the first prompt, then per turn a reply and the next user turn's prompt."""
    ids = chat.first_prompt(user)
    mask = [0] * len(ids)
    for turn, think in enumerate(thinks):
        reply = chat.encode(f" {think} </think> <answer> Left </answer>")
        ids, mask = ids + reply, mask + [1] * len(reply)
        if turn < len(thinks) - 1:
            following = chat.next_prompt(f"Turn {turn + 2}: the box moved", reply)
            ids, mask = ids + following, mask + [0] * len(following)
    turns = [{"think": think, "answer": "Left"} for think in thinks]
    return Trajectory(group=group, seed=group, ids=ids, mask=mask, turns=turns)


def test_trajectory_pairs_take_the_conversation_so_far_through_each_turns_think(tiny):
    chat = tiny.chat
    trajs = [
        conversation(chat, 0, "a", ["one", "two", "three"]),
        conversation(chat, 1, "b", ["uno", "", "tres"]),
    ]
    sampled, draws, rate = collapse.trajectory_pairs(trajs, chat, num_samples=64, rng=random.Random(0))
    assert rate == pytest.approx(5 / 6)  # every turn of every trajectory counts; the empty Z does not
    assert len(draws) == 5 and len(sampled) == len(set(draws))  # draws capped at the valid turns
    think_id = chat.encode("<think>")[-1]
    by_z = {
        tuple(chat.encode(turn["think"])): (t, k)
        for t in trajs
        for k, turn in enumerate(t.turns)
        if turn["think"]
    }
    for x, z in sampled:
        t, k = by_z[tuple(z)]
        start = collapse.reply_starts(t.mask)[k]
        assert x == t.ids[:start] and x[-1] == think_id  # the whole conversation before turn k's reply
    first = {tuple(chat.first_prompt(u)) for u in ("a", "b")}
    # Over a few seeded batches the draws reach turns beyond the first, whose prompts hold earlier replies.
    later = [
        x
        for seed in range(5)
        for x, _ in collapse.trajectory_pairs(trajs, chat, 64, random.Random(seed))[0]
        if tuple(x) not in first
    ]
    assert later and all(any(x[: len(f)] == list(f) for f in first) for x in later)


def test_trajectory_pairs_pick_a_trajectory_uniformly_then_a_turn(tiny):
    chat = tiny.chat
    short, long = conversation(chat, 0, "a", ["only"]), conversation(chat, 1, "b", ["w", "x", "y", "z"])
    only = chat.encode("only")
    hits = draws = 0
    for seed in range(200):
        sampled, drawn, _ = collapse.trajectory_pairs([short, long], chat, 64, random.Random(seed))
        hits += sum(sampled[d][1] == only for d in drawn)
        draws += len(drawn)
    # Uniform over trajectories gives the one-turn trajectory half the draws; uniform over turns, a fifth.
    assert 0.4 < hits / draws < 0.6


def test_the_trajectory_variant_logs_its_own_keys_reproducibly_and_leaves_the_first_turn_alone(tiny):
    chat, model, pad = tiny.chat, tiny.policy.model, tiny.pad_id
    trajs = [
        conversation(chat, g, user, [f"{user} {turn}" for turn in range(3)])
        for g, user in enumerate(["go left", "go left", "push up", "push up"])
    ]
    found = CollapseProbe(num_samples=64, seed=3, traj_samples=64).measure(1, trajs, chat, model, pad, 8)
    again = CollapseProbe(num_samples=64, seed=3, traj_samples=64).measure(1, trajs, chat, model, pad, 8)
    assert found == again  # seeded by (seed, step)
    off = CollapseProbe(num_samples=64, seed=3).measure(1, trajs, chat, model, pad, 8)
    assert off and not any(key.startswith("collapse/traj/") for key in off)  # off unless asked
    first = {k: v for k, v in found.items() if not k.startswith("collapse/traj/")}
    traj = {
        k.replace("collapse/traj/", "collapse/"): v
        for k, v in found.items()
        if k.startswith("collapse/traj/")
    }
    assert set(first) == set(traj) and all(math.isfinite(v) for v in found.values())
    # The first-turn estimate is what the first-turn sampling alone gives: same stream, same pairs.
    sampled, rate = collapse.pairs(trajs, chat, 64, random.Random("collapse:3:1"))
    alone, _ = collapse.estimate(sampled, list(range(len(sampled))), model, pad, 8, None)
    assert first == {**alone, "collapse/valid_thinking_rate": rate}
    assert first["collapse/num_prompts"] == 2  # identical prompts are one column
    assert traj["collapse/num_samples"] == 12 and traj["collapse/num_prompts"] > 2  # later turns differ
    assert traj["collapse/retrieval_chance"] == pytest.approx(1 / traj["collapse/num_prompts"])


def test_the_trajectory_variant_is_skipped_when_all_its_prompts_are_identical(tiny):
    chat = tiny.chat
    same = [
        conversation(chat, 0, "a", ["go"]),
        conversation(chat, 0, "a", ["stay"]),
        conversation(chat, 1, "b", [""]),
    ]
    probe = CollapseProbe(num_samples=64, seed=0, traj_samples=64)
    found = probe.measure(0, same, chat, tiny.policy.model, tiny.pad_id, 8)
    # one distinct prompt with a valid Z in either sampling: no estimate (not NaN), only the rates
    assert set(found) == {"collapse/valid_thinking_rate", "collapse/traj/valid_thinking_rate"}


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


def test_the_trajectory_variant_is_on_by_default_and_its_draws_are_checked():
    assert TrainConfig.preset("starpo-s").diagnostics.collapse_traj_samples == 64
    assert TrainConfig.preset("starpo-s", diagnostics={"collapse_traj_samples": 0})
    with pytest.raises(ConfigError, match="diagnostics.collapse_traj_samples"):
        TrainConfig.preset("starpo-s", diagnostics={"collapse_traj_samples": 1})
