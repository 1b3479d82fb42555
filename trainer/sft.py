"""The SFT baseline (RAGEN paper, Appendix C): supervised fine-tuning on the environments' oracle play.

Episodes are played by the environment's oracle (`env.oracle_action()`: BFS for Sokoban, value iteration
for FrozenLake, the better arm for Bandit; on slippery ice `env.oracle_plan()`, a turn's actions chosen
from the turn's state, since the model writes them without seeing where each one slid), optionally noisy
(each action random with probability `noise`), and written in the rollout's own chat format: the same
prompts, turns, action budget and `Reward:` feedback, so the model learns exactly the text it will later
act in. The loss is the token mean of -log p over the replies only. The result is a plain model folder
(LoRA merged) that `model.name` can start an experiment from.
"""

from __future__ import annotations

import json
import os
import random
import shutil
from collections.abc import Callable

import torch

import envs
from trainer.config import RolloutConfig, TrainConfig
from trainer.loop import optimizer_step, pad_batch, set_determinism, token_logprobs
from trainer.models import load_policy
from trainer.rollout import ChatFormat, Trajectory, next_user_message, opening_ids

SFT_SEED_BASE = 5_000_000_000  # far from validation (0..) and training (10_000 + 10^7 * seed + ...) seeds


def oracle_episode(
    env, seed: int, rollout_cfg: RolloutConfig, chat: ChatFormat, noise: float, rng: random.Random
) -> Trajectory:
    """One oracle-played episode as token ids, mask 1 on the replies."""
    obs = env.reset(seed=seed)
    traj = Trajectory(group=0, seed=seed)
    traj.ids = opening_ids(chat, env, obs, rollout_cfg)
    traj.mask = [0] * len(traj.ids)
    for turn in range(1, rollout_cfg.max_turns + 1):
        actions: list[str] = []
        turn_reward, done = 0.0, False
        left = rollout_cfg.max_actions_per_episode - traj.executed
        length = min(rollout_cfg.max_actions_per_turn, left)
        after = min(left - length, (rollout_cfg.max_turns - turn) * rollout_cfg.max_actions_per_turn)
        plan = env.oracle_plan(length, after)
        while not done and len(actions) < (length if plan is None else len(plan)):
            if rng.random() < noise:
                action = rng.choice(env.actions)  # a plan goes on as planned: the model would not replan
            else:
                action = env.oracle_action() if plan is None else plan[len(actions)]
            obs, reward, done, info = env.step(action)
            actions.append(action)
            traj.executed += 1
            turn_reward += reward
            traj.success = traj.success or bool(info.get("success", False))
        answer = " || ".join(actions)
        reply = chat.encode((" </think> " if rollout_cfg.thinking else " ") + f"<answer> {answer} </answer>")
        traj.ids += reply
        traj.mask += [1] * len(reply)
        traj.reward += turn_reward
        if done or traj.executed >= rollout_cfg.max_actions_per_episode or turn == rollout_cfg.max_turns:
            break
        following = chat.next_prompt(
            next_user_message(turn_reward, turn + 1, obs, rollout_cfg.thinking), reply
        )
        traj.ids += following
        traj.mask += [0] * len(following)
    return traj


def sft(
    cfg: TrainConfig,
    out_dir: str,
    episodes: int,
    noise: float = 0.0,
    epochs: int = 1,
    lr: float | None = None,
    log: Callable[[str], None] = lambda message: None,
) -> dict:
    """Fine-tune cfg.model on `episodes` oracle episodes of cfg.env, save it to out_dir; returns a summary."""
    set_determinism(cfg)
    policy = load_policy(cfg.model, with_critic=False, with_reference=False)
    chat = ChatFormat(policy.tokenizer, cfg.rollout.thinking)
    env = envs.make(cfg.env.name, **cfg.env.params)
    rng = random.Random(cfg.seed)
    trajs = [
        oracle_episode(env, SFT_SEED_BASE + cfg.seed * episodes + i, cfg.rollout, chat, noise, rng)
        for i in range(episodes)
    ]
    too_long = sum(len(t.ids) > policy.context_len for t in trajs)
    if too_long:
        raise ValueError(
            f"{too_long} oracle episodes are longer than the model's context "
            f"({policy.context_len} tokens); lower rollout.max_turns"
        )
    pad_id = (
        policy.tokenizer.pad_token_id
        if policy.tokenizer.pad_token_id is not None
        else policy.tokenizer.eos_token_id
    )
    params = [p for p in policy.model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=lr or cfg.optim.actor_lr, weight_decay=cfg.optim.weight_decay)
    micro_batch_size, losses = cfg.optim.micro_batch_size, []
    policy.model.train()
    for epoch in range(epochs):
        order = torch.randperm(len(trajs)).tolist()
        epoch_losses = []
        for start in range(0, len(order), micro_batch_size):
            chunk = [trajs[i] for i in order[start : start + micro_batch_size]]
            ids, attention, resp = pad_batch(chunk, pad_id, policy.device)
            with policy.autocast():
                logp, _ = token_logprobs(policy.model, ids, attention, resp, 1.0)
            loss = -(logp * resp).sum() / resp.sum()
            loss.backward()
            optimizer_step(params, optimizer, cfg.optim.grad_clip)
            epoch_losses.append(loss.item())
        losses += epoch_losses
        log(f"epoch {epoch + 1}/{epochs}: mean loss {sum(epoch_losses) / len(epoch_losses):.4f}")
    summary = {
        "env": cfg.env.name,
        "episodes": episodes,
        "noise": noise,
        "epochs": epochs,
        "lr": lr or cfg.optim.actor_lr,
        "oracle_success": sum(t.success for t in trajs) / len(trajs),
        "first_loss": losses[0],
        "last_loss": losses[-1],
        "base_model": cfg.model.name,
        "lora_rank": cfg.model.lora_rank,
    }
    save_model(policy, out_dir, summary)
    return summary


def save_model(policy, out_dir: str, summary: dict) -> None:
    """A plain model folder (LoRA merged into the weights), written to a temp dir and renamed into place."""
    model = policy.model.merge_and_unload() if policy.lora else policy.model
    tmp = f"{out_dir.rstrip('/')}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    policy.tokenizer.save_pretrained(tmp)
    with open(os.path.join(tmp, "sft.json"), "w") as f:
        json.dump(summary, f, indent=1)
    os.replace(tmp, out_dir)
