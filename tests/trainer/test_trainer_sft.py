"""The SFT baseline: oracle episodes in the rollout's chat format, and a model folder RL can start from."""

import json
import random

import pytest

import envs
from trainer.config import TrainConfig
from trainer.loop import Trainer
from trainer.models import load_policy
from trainer.rollout import ChatFormat
from trainer.sft import oracle_episode, sft


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return load_policy(TrainConfig().model, with_critic=False, with_reference=False).tokenizer


def replies(tokenizer, traj):
    spans, current = [], []
    for token, m in zip(traj.ids + [None], traj.mask + [0]):
        if m:
            current.append(token)
        elif current:
            spans.append(tokenizer.decode(current))
            current = []
    return spans


def test_oracle_episodes_are_written_as_the_rollout_would(tokenizer):
    cfg = TrainConfig.preset("starpo-s", env={"name": "sokoban"}, rollout={"max_actions_per_turn": 2})
    chat, env = ChatFormat(tokenizer, True), envs.make("sokoban")
    traj = oracle_episode(env, 11, cfg.rollout, chat, 0.0, random.Random(0))
    env.reset(seed=11)
    solution = envs.sokoban.solve(env.level)
    moves = [{"l": "Left", "u": "Up", "r": "Right", "d": "Down"}[c.lower()] for c in solution][:10]
    texts = replies(tokenizer, traj)
    parsed = [chat.parse(text) for text in texts]
    assert all(p is not None for p in parsed)  # every reply is well formatted for the rollout's parser
    assert [a for _, answer in parsed for a in env.parse_actions(answer)] == moves
    assert all(len(env.parse_actions(answer)) <= 2 for _, answer in parsed)
    assert traj.success == (len(solution) <= 10)
    prompt_text = tokenizer.decode([i for i, m in zip(traj.ids, traj.mask) if not m])
    assert "Turn 1:" in prompt_text and (len(texts) == 1 or "Reward: " in prompt_text)


def test_noisy_oracle_takes_random_actions(tokenizer):
    cfg = TrainConfig.preset("starpo-s", env={"name": "frozenlake"})
    chat, env = ChatFormat(tokenizer, True), envs.make("frozenlake", slippery=False)
    clean = [oracle_episode(env, seed, cfg.rollout, chat, 0.0, random.Random(seed)) for seed in range(30)]
    noisy = [oracle_episode(env, seed, cfg.rollout, chat, 1.0, random.Random(seed)) for seed in range(30)]
    assert all(t.success for t in clean)  # value iteration on a non-slippery map always arrives
    assert sum(t.success for t in noisy) < 20


def test_on_slippery_ice_a_turn_is_the_plan_made_from_its_state(tokenizer):
    # The step-by-step oracle's later actions in a turn depend on slides the model never sees. Replaying
    # the episode (the env's slides are seeded), every turn's answer is the plan made at the turn's start.
    cfg = TrainConfig.preset("starpo-s", env={"name": "frozenlake"})
    per_turn, budget = cfg.rollout.max_actions_per_turn, cfg.rollout.max_actions_per_episode
    chat, env = ChatFormat(tokenizer, True), envs.make("frozenlake", size=4)
    turns_seen = 0
    for seed in range(6):
        traj = oracle_episode(env, seed, cfg.rollout, chat, 0.0, random.Random(seed))
        env.reset(seed=seed)
        used, done = 0, False
        for text in replies(tokenizer, traj):
            answer = env.parse_actions(chat.parse(text)[1])
            plan = env.oracle_plan(min(per_turn, budget - used), max(budget - used - per_turn, 0))
            assert answer == plan[: len(answer)] and answer
            for action in answer:
                _, _, done, _ = env.step(action)
            used += len(answer)
            assert done or answer == plan  # a turn is cut short only by the episode's end
            turns_seen += 1
    assert turns_seen > 6  # some episodes reached a second turn, whose plan has no actions after it


def test_sft_writes_a_model_an_experiment_starts_from(tiny_model_dir, tmp_path, tokenizer):
    cfg = TrainConfig.preset("starpo-s", env={"name": "bandit"}, optim={"micro_batch_size": 8})
    out = tmp_path / "sft-bandit"
    summary = sft(cfg, str(out), episodes=32, epochs=2, lr=2e-3)
    assert summary["oracle_success"] == 1.0 and summary["last_loss"] < summary["first_loss"]
    assert json.loads((out / "sft.json").read_text())["episodes"] == 32
    started = TrainConfig.preset(
        "grpo", env={"name": "bandit"}, model={"warm_start": str(out)}, rollout={"val_seeds": 32}
    )
    assert started.optim.actor_lr == 5e-4  # model.name is still "tiny": its profile applies
    before = Trainer(TrainConfig.preset("grpo", env={"name": "bandit"}, rollout={"val_seeds": 32})).validate()
    after = Trainer(started).validate()
    assert after > before  # imitating the better arm shows in validation success
