"""Fidelity to RAGEN / RAGEN-2: filter rules, the environment's episode shape, the reward the model is shown,
the per-turn penalty, and the pieces of the update the loop really runs (hand-computed cases)."""

import math

import pytest
import torch

import envs
from trainer import advantages as A
from trainer import rollout as R
from trainer.config import ConfigError, TrainConfig
from trainer.filter import keep_groups, zero_groups
from trainer.loop import FilterStarved, Trainer, token_logprobs, train
from trainer.sink import MemorySink


def groups_with_std(*stds: float) -> torch.Tensor:
    """(P, 2) rewards whose unbiased in-group std is exactly `stds` (std of [0, s*sqrt 2] is s)."""
    return torch.tensor([[0.0, s * math.sqrt(2)] for s in stds])


# scores .0 .5 .3 .2 .0 .1, sum 1.1; groups 0 and 4 have no spread
SCORES = groups_with_std(0.0, 0.5, 0.3, 0.2, 0.0, 0.1)


def test_scores_are_the_unbiased_std_and_zero_groups_are_counted():
    raw = torch.tensor([[1.0, 0.0, 1.0, 0.0], [0.5, 0.5, 0.5, 0.5]])
    assert keep_groups(raw, "top_k_abs", 1) == [0]
    assert zero_groups(raw) == 1 and zero_groups(SCORES) == 2


def test_linear_top_p_follows_ragen2():
    # tau = .9 * 1.1 - .01 = .98: .5 -> .8 -> 1.0 >= .98
    assert keep_groups(SCORES, "top_p", 0.9) == [1, 2, 3]
    # tau = .5 * 1.1 - .01 = .54: .5 < .54, add .3. (On variances, .25 >= .5 * .39 would keep group 1 only.)
    assert keep_groups(SCORES, "top_p", 0.5) == [1, 2]
    # zero groups add nothing to the sum, so include_zero does not change the linear rule
    assert keep_groups(SCORES, "top_p", 0.5, include_zero=False) == [1, 2]
    # tau = .005 * 1.1 - .01 < 0 is reached before any group is added: RAGEN-2 keeps nothing
    assert keep_groups(SCORES, "top_p", 0.005) == []
    assert keep_groups(torch.zeros(3, 4), "top_p", 0.9) == []
    # value 1 keeps every candidate
    assert keep_groups(SCORES, "top_p", 1.0) == [0, 1, 2, 3, 4, 5]
    assert keep_groups(SCORES, "top_p", 1.0, include_zero=False) == [1, 2, 3, 5]


def test_softmax_top_p_follows_ragen2():
    # softmax(0 .5 .3 .2 0 .1): exp 1 1.6487 1.3499 1.2214 1 1.1052 / 7.3252 = .1365 .2251 .1843 .1667 .1365
    # .1509; sorted cumsum .2251 .4094 .5761: searchsorted(.5) = 2, keep 3
    assert keep_groups(SCORES, "top_p", 0.5, top_p_mode="softmax") == [1, 2, 3]
    # without zero groups: exp .5 .3 .2 .1 / 5.3252 = .3096 .2535 .2294 .2075; cumsum .3096 .5631: keep 2
    assert keep_groups(SCORES, "top_p", 0.5, include_zero=False, top_p_mode="softmax") == [1, 2]


def test_min_p_top_k_abs_and_ratio_with_int_not_ceil():
    assert keep_groups(SCORES, "min_p", 0.5) == [1, 2]  # >= .25
    assert keep_groups(SCORES, "min_p", 0.3) == [1, 2, 3]  # >= .15
    assert keep_groups(SCORES, "top_k_abs", 2) == [1, 2]
    assert keep_groups(SCORES, "top_k_abs", 5) == [0, 1, 2, 3, 5]  # a tie at 0: the lower index first
    assert keep_groups(SCORES, "top_k_abs", 10, include_zero=False) == [1, 2, 3, 5]
    assert keep_groups(SCORES, "top_ratio", 0.25) == [1]  # int(.25 * 6) = 1; ceil would keep 2
    assert keep_groups(SCORES, "top_ratio", 0.5) == [1, 2, 3]
    ten = groups_with_std(*[g / 10 for g in range(10)])
    assert keep_groups(ten, "top_ratio", 0.25) == [8, 9]  # int(2.5) = 2; ceil would keep 3
    assert keep_groups(ten, "top_ratio", 0.01) == [9]  # at least one
    assert keep_groups(torch.zeros(3, 4), "min_p", 0.5, include_zero=False) == []
    assert keep_groups(SCORES, "none") == [0, 1, 2, 3, 4, 5]


def test_filter_settings_are_validated():
    with pytest.raises(ConfigError) as caught:
        TrainConfig.from_dict(
            {
                "algorithm": {
                    "filter": "top_q",
                    "filter_top_p_mode": "cubic",
                    "filter_top_k": 0,
                    "filter_min_p": 1.5,
                    "filter_empty_stop_steps": -1,
                }
            }
        )
    assert set(caught.value.errors) == {
        "algorithm.filter",
        "algorithm.filter_top_p_mode",
        "algorithm.filter_top_k",
        "algorithm.filter_min_p",
        "algorithm.filter_empty_stop_steps",
    }


def test_bandit_is_one_pull_per_episode_unless_overridden():
    """The environment carries RAGEN's episode shape (config/_1_bandit.yaml); user settings still win."""
    hub = TrainConfig.preset("starpo-s", model={"name": "Qwen/Qwen2.5-0.5B-Instruct"})
    r = hub.rollout
    assert (r.max_turns, r.max_actions_per_turn, r.max_actions_per_episode, r.max_new_tokens) == (
        1,
        1,
        1,
        500,
    )
    assert TrainConfig.preset("starpo-s").rollout.max_new_tokens == 64  # the tiny profile's budget on top
    reversed_pair = TrainConfig.preset("grpo", env={"name": "bandit-teacher-engineer-reversed"})
    assert reversed_pair.rollout.max_turns == 1
    sokoban = TrainConfig.preset(
        "starpo-s", env={"name": "sokoban"}, model={"name": "Qwen/Qwen2.5-0.5B-Instruct"}
    )
    assert (
        sokoban.rollout.max_turns,
        sokoban.rollout.max_actions_per_turn,
        sokoban.rollout.max_new_tokens,
    ) == (5, 5, 400)
    mine = TrainConfig.preset("starpo-s", "rollout.max_turns=3", "rollout.max_actions_per_episode=3")
    assert (mine.rollout.max_turns, mine.rollout.max_actions_per_episode) == (3, 3)


def test_whitening_runs_over_all_micro_batches_together():
    # two micro-batches of different widths; masked-in values 1, 3 | 5, 7: mean 4, unbiased std sqrt(20/3)
    xs = [torch.tensor([[1.0, 3.0, 100.0]]), torch.tensor([[5.0, -9.0], [7.0, 0.0]])]
    masks = [torch.tensor([[1.0, 1.0, 0.0]]), torch.tensor([[1.0, 0.0], [1.0, 0.0]])]
    out = A.whiten(xs, masks)
    s = math.sqrt(20 / 3)
    assert out[0].tolist() == [pytest.approx([-3 / s, -1 / s, 0], abs=1e-6)]
    assert out[1].tolist() == [pytest.approx([1 / s, 0], abs=1e-6), pytest.approx([3 / s, 0], abs=1e-6)]


def test_ppo_token_rewards_carry_the_per_token_kl_penalty():
    mask = torch.tensor([[1.0, 1.0, 0.0, 1.0, 0.0]])
    kl = torch.tensor([[0.5, -0.2, 9.0, 0.1, 9.0]])
    out = A.token_rewards(torch.tensor([1.0]), mask, kl, kl_coef=0.1)
    assert out[0].tolist() == pytest.approx([-0.05, 0.02, 0.0, 1.0 - 0.01, 0.0])


def test_the_loop_whitens_ppo_advantages(tiny_model_dir, monkeypatch):
    """Trainer.update sends its GAE advantages through A.whiten: the advantages the loss sees have mean 0
    and std 1 over the batch's model tokens."""
    cfg = TrainConfig.preset(
        "starpo",
        "algorithm.kl_coef=0.01",
        env={"name": "bandit"},
        rollout={"env_groups": 2, "group_size": 2, "max_new_tokens": 24},
        optim={"mini_batch_size": 4, "micro_batch_size": 2},
    )
    trainer = Trainer(cfg)
    torch.manual_seed(0)
    trajs = trainer.play([1, 1, 2, 2], [0, 0, 1, 1], 1.0)
    seen = []
    from trainer import losses

    real_loss = losses.policy_loss

    def recording(logp, old, adv, mask, *args, **kwargs):
        seen.append(adv[mask.bool()].detach())
        return real_loss(logp, old, adv, mask, *args, **kwargs)

    monkeypatch.setattr(losses, "policy_loss", recording)
    metrics = trainer.update(trajs, torch.tensor([0, 0, 1, 1]))
    flat = torch.cat(seen)
    assert flat.mean().item() == pytest.approx(0.0, abs=1e-5)
    assert flat.std().item() == pytest.approx(1.0, abs=1e-4)
    assert "actor/kl_ref" in metrics


def test_entropy_bonus_raises_entropy_when_advantages_are_zero(tiny_model_dir):
    """Equal rewards give GRPO zero advantages: the only gradient is -entropy_coef * entropy. With the bonus
    the policy's entropy on the batch rises; without it (no weight decay) the weights do not move at all."""

    def run(coef):
        cfg = TrainConfig.preset(
            "grpo",
            env={"name": "bandit"},
            algorithm={"kl_coef": 0.0, "entropy_coef": coef},
            rollout={"env_groups": 1, "group_size": 4, "max_new_tokens": 24},
            optim={"mini_batch_size": 4, "micro_batch_size": 4, "weight_decay": 0.0, "actor_lr": 1e-3},
        )
        trainer = Trainer(cfg)
        torch.manual_seed(0)
        trajs = trainer.play([1, 1, 1, 1], [0, 0, 0, 0], 1.0)
        for t in trajs:
            t.reward = 0.5
        from trainer.loop import pad_batch

        ids, att, resp = pad_batch(trajs, trainer.pad_id, trainer.policy.device)

        def entropy():
            with torch.no_grad():
                _, ent = token_logprobs(trainer.policy.model, ids, att, resp, 1.0, with_entropy=True)
            return ((ent * resp).sum() / resp.sum()).item()

        before_weights = [p.detach().clone() for p in trainer.actor_params]
        before = entropy()
        metrics = trainer.update(trajs, torch.zeros(4, dtype=torch.long))
        moved = any(not torch.equal(a, b) for a, b in zip(before_weights, trainer.actor_params))
        return before, entropy(), moved, metrics

    before, after, moved, metrics = run(0.5)
    assert metrics["actor/pg_loss"] == 0.0 and moved and after > before
    _, _, moved, _ = run(0.0)
    assert not moved


class ScriptedReplies:
    """Stands in for sampling: turn k of every trajectory answers replies[k] (tokenised by the real tokenizer);
    records the prompts so the test can read what the model was told."""

    def __init__(self, tokenizer, replies):
        self.tok, self.replies, self.turn, self.prompts = tokenizer, replies, 0, []

    def __call__(self, model, prompts, *args, **kwargs):
        self.prompts.append([self.tok.decode(p) for p in prompts])
        reply = self.tok(self.replies[self.turn], add_special_tokens=False)["input_ids"]
        self.turn += 1
        return [list(reply) for _ in prompts]


def test_turn_penalties_and_the_reward_the_model_is_shown(tiny_model_dir, monkeypatch):
    """-0.1 for a turn that does not parse, that holds an invalid word (its valid words still run), or that
    holds no action; none for a clean turn. The next prompt shows the environment's reward only (RAGEN)."""
    from trainer.models import load_policy

    policy = load_policy(TrainConfig().model, with_critic=False, with_reference=False)
    replies = [
        " thinking without closing <answer> Up </answer>",  # no </think>: unparsed
        " ok </think> <answer> Up || Jump </answer>",  # invalid word; Up runs
        " ok </think> <answer> </answer>",  # no action
        " ok </think> <answer> Left </answer>",
    ]  # clean
    script = ScriptedReplies(policy.tokenizer, replies)
    monkeypatch.setattr(R, "generate", script)
    cfg = TrainConfig.preset(
        "starpo",
        env={"name": "sokoban"},
        rollout={"max_turns": 4, "max_actions_per_turn": 5, "max_actions_per_episode": 10},
    )
    chat = R.ChatFormat(policy.tokenizer, True)
    [traj] = R.rollout(
        policy.model, policy.tokenizer, chat, "sokoban", {}, [7], [0], cfg.rollout, 1.0, policy.context_len
    )
    env = envs.make("sokoban")
    env.reset(seed=7)
    up, left = env.step("Up")[1], env.step("Left")[1]  # what the environment pays for the actions that ran
    assert [t["valid"] for t in traj.turns] == [False, False, False, True]
    assert [t["actions"] for t in traj.turns] == [[], ["Up"], [], ["Left"]]
    assert [t["reward"] for t in traj.turns] == pytest.approx([-0.1, up - 0.1, -0.1, left])
    assert traj.reward == pytest.approx(up + left - 0.3)
    shown = [prompts[0].rsplit("Reward: ", 1)[1].split("\n", 1)[0] for prompts in script.prompts[1:]]
    assert shown == ["0.0", str(round(up, 3)), "0.0"]


def test_empty_filter_steps_are_skipped_logged_and_stop_the_run(tiny_model_dir, tmp_path):
    """top_p at 1e-6 has a negative threshold, so RAGEN-2's rule keeps no group: no update, the step counted as
    skipped, and after filter_empty_stop_steps such steps in a row the run stops (checkpointed)."""
    cfg = TrainConfig.preset(
        "starpo-s",
        env={"name": "bandit"},
        algorithm={"filter": "top_p", "filter_top_p": 1e-6, "filter_empty_stop_steps": 2},
        rollout={"env_groups": 2, "group_size": 2, "max_new_tokens": 24, "val_seeds": 2},
        optim={"mini_batch_size": 4, "micro_batch_size": 2},
        schedule={"steps": 5, "val_every": 0, "checkpoint_every": 0},
    )
    sink = MemorySink()
    with pytest.raises(FilterStarved, match="kept no group for 2 steps in a row"):
        train(cfg, sink, str(tmp_path))
    assert [r["step"] for r in sink.rows] == [0, 1]
    for row in sink.rows:
        assert row["train/filter_skipped"] == 1.0 and row["train/filter_kept_ratio"] == 0.0
        assert "actor/pg_loss" not in row and 0 <= row["train/filter_zero_groups"] <= 2
    assert sink.checkpoints[-1][0] == 2


def test_validation_on_several_environments(tiny_model_dir, tmp_path):
    """rollout.val_envs: each is played on the validation seeds in its own environment and logged as
    val/<env>/success; the training environment's entry is val/success itself."""
    cfg = TrainConfig.preset(
        "grpo",
        env={"name": "bandit-teacher-engineer"},
        rollout={
            "env_groups": 2,
            "group_size": 2,
            "max_new_tokens": 24,
            "val_seeds": 4,
            "val_envs": ["bandit-teacher-engineer", "bandit-librarian-trader"],
        },
        optim={"mini_batch_size": 4, "micro_batch_size": 2},
        schedule={"steps": 1, "val_every": 1, "checkpoint_every": 0},
    )
    sink = MemorySink()
    assert train(cfg, sink, str(tmp_path)) == "completed"
    [row] = sink.rows
    assert row["val/bandit-teacher-engineer/success"] == row["val/success"]
    assert 0.0 <= row["val/bandit-librarian-trader/success"] <= 1.0
    trainer = Trainer(cfg)
    [other] = trainer.play([0], [0], 0.5, "bandit-librarian-trader")
    [own] = trainer.play([0], [0], 0.5)
    text = [trainer.policy.tokenizer.decode(t.ids) for t in (other, own)]
    assert "Librarian" in text[0] and "Engineer" not in text[0] and "Engineer" in text[1]
    with pytest.raises(ConfigError) as caught:
        TrainConfig.preset("grpo", rollout={"val_envs": ["bandit", "chess"]})
    assert "unknown environment 'chess'" in caught.value.errors["rollout.val_envs"]
    with pytest.raises(ConfigError) as caught:
        TrainConfig.preset("grpo", rollout={"val_envs": ["bandit"]}, schedule={"val_every": 0})
    assert "val_every" in caught.value.errors["rollout.val_envs"]
