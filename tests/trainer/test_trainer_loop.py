"""The whole loop with the tiny model: every environment, resume equality, stop, NaN skipping, CLI."""

import json
import math
import os

import pytest
import torch

from trainer import loop, losses
from trainer.config import TrainConfig
from trainer.loop import Trainer, token_logprobs, train
from trainer.sink import JsonlSink, MemorySink

SMALL = {
    "rollout": {"env_groups": 2, "group_size": 2, "max_turns": 2, "max_new_tokens": 24, "val_seeds": 4},
    "optim": {"mini_batch_size": 4, "micro_batch_size": 2},
    "schedule": {
        "steps": 2,
        "val_every": 1,
        "checkpoint_every": 1,
        "keep_checkpoints": 2,
        "samples_per_step": 2,
    },
}
STEP_KEYS = {
    "train/success",
    "train/reward_mean",
    "train/reward_std_in_group",
    "train/frac_zero_std_groups",
    "train/format_valid",
    "train/actions_valid",
    "train/filter_kept_ratio",
    "actor/entropy",
    "actor/grad_norm",
    "actor/clip_frac",
    "actor/clip_frac_high",
    "actor/approx_kl",
    "actor/pg_loss",
    "actor/skipped_steps",
    "response/tokens_mean",
    "response/think_tokens_mean",
    "val/success",
    "time/rollout_s",
    "time/update_s",
    "time/step_s",
    "perf/tokens_per_s",
    "perf/rss_gb",  # and no accelerator memory on a CPU
}


@pytest.mark.parametrize(
    "preset,env,expect",
    [
        ("starpo-s", "frozenlake", {"critic/vf_loss", "critic/explained_var"}),
        ("grpo", "sokoban", {"actor/kl_ref"}),
        ("starpo", "bandit", {"actor/kl_ref", "critic/vf_loss"}),
    ],
)
def test_each_environment_trains_and_reports(tiny_model_dir, tmp_path, preset, env, expect):
    cfg = TrainConfig.preset(preset, env={"name": env}, **SMALL)
    sink = JsonlSink(str(tmp_path), cfg.to_yaml(), stream=open(os.devnull, "w"))
    assert train(cfg, sink, str(tmp_path)) == "completed"
    rows = [json.loads(line) for line in open(tmp_path / "metrics.jsonl")]
    assert [r["step"] for r in rows] == [0, 1]
    for row in rows:
        assert STEP_KEYS | expect <= set(row)
        assert not {"perf/max_memory_allocated_gb", "perf/max_memory_reserved_gb"} & set(row)
        assert 0.05 < row["perf/rss_gb"] < 64  # this process, torch and the tiny model: a few hundred MB
        assert all(v is None or math.isfinite(v) for v in row.values())
    # every group's in-group std, one record per step: their mean is the step's train/reward_std_in_group
    records = [json.loads(line) for line in open(tmp_path / "records.jsonl")]
    assert [(r["step"], r["key"], len(r["values"])) for r in records] == [
        (step, "train/reward_std_hist", cfg.rollout.env_groups) for step in (0, 1)
    ]
    for record, row in zip(records, rows):
        assert sum(record["values"]) / len(record["values"]) == pytest.approx(
            row["train/reward_std_in_group"]
        )
    samples = [json.loads(line) for line in open(tmp_path / "samples.jsonl")]
    assert len(samples) == 4
    assert {"group", "seed", "reward", "success", "turns", "text"} <= set(samples[0])
    assert {"state", "think", "answer", "actions", "reward", "valid"} <= set(samples[0]["turns"][0])
    assert TrainConfig.from_yaml((tmp_path / "config.yaml").read_text()) == cfg
    ckpts = sorted(os.listdir(tmp_path / "checkpoints"))
    assert ckpts == ["step_000001", "step_000002"]  # keep_checkpoints=2


def test_lora_with_reference_as_disabled_adapter(tiny_model_dir, tmp_path):
    cfg = TrainConfig.preset(
        "grpo", "model.lora_rank=4", "model.lora_alpha=8", env={"name": "bandit"}, **SMALL
    )
    sink = MemorySink()
    assert train(cfg, sink, str(tmp_path)) == "completed"
    # a fresh adapter is the identity, so at step 0 policy == reference (the disabled adapter)
    assert abs(sink.rows[0]["actor/kl_ref"]) < 1e-5
    assert sink.rows[1]["actor/kl_ref"] != 0.0
    assert os.path.exists(tmp_path / "checkpoints" / "step_000002" / "policy" / "adapter_config.json")


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_gradient_checkpointing_trains_through_transformers_current_api(tiny_model_dir, tmp_path, lora_rank):
    """model.gradient_checkpointing (policy and critic) through activation_checkpointing_enable: the old
    name warned in every worker log that it goes in transformers 6."""
    import warnings

    cfg = TrainConfig.preset(
        "starpo",
        "model.gradient_checkpointing=true",
        f"model.lora_rank={lora_rank}",
        env={"name": "bandit"},
        **SMALL,
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert train(cfg, MemorySink(), str(tmp_path)) == "completed"
    assert not [w for w in caught if "gradient_checkpointing_enable" in str(w.message)]


def _strip(rows):
    return [{k: v for k, v in r.items() if not k.startswith(("time/", "perf/"))} for r in rows]


@pytest.mark.parametrize("mini_batch_size,forwards", [(4, 2), (2, 3)])
def test_the_first_mini_batch_reuses_its_training_forward_as_old_logprobs(
    tiny_model_dir, monkeypatch, mini_batch_size, forwards
):
    """4 trajectories in micro-batches of 2: the mini-batch trained before any optimizer step needs no
    separate no-grad pass; a later one does (the policy has moved by then)."""
    cfg = TrainConfig.preset(
        "grpo",
        "algorithm.kl_coef=0",
        f"optim.mini_batch_size={mini_batch_size}",
        env={"name": "bandit"},
        **SMALL,
    )
    trainer = Trainer(cfg)
    trajs = trainer.play([1, 1, 2, 2], [0, 0, 1, 1], 1.0)
    calls = []

    def counted(*args, **kwargs):
        calls.append(1)
        return token_logprobs(*args, **kwargs)

    monkeypatch.setattr(loop, "token_logprobs", counted)
    metrics = trainer.update(trajs, torch.tensor([0, 0, 1, 1]))
    assert len(calls) == forwards
    if mini_batch_size == 4:  # one mini-batch: every ratio is exactly 1
        assert metrics["actor/approx_kl"] == 0.0 and metrics["actor/clip_frac"] == 0.0


def test_resume_equals_uninterrupted_run(tiny_model_dir, tmp_path):
    cfg4 = TrainConfig.preset(
        "starpo-s", "schedule.steps=4", "deterministic=true", env={"name": "frozenlake"}, **SMALL
    )
    cfg2 = TrainConfig.from_dict({**cfg4.to_dict(), "schedule": {**cfg4.to_dict()["schedule"], "steps": 2}})
    full, part = MemorySink(), MemorySink()
    train(cfg4, full, str(tmp_path / "full"))
    train(cfg2, part, str(tmp_path / "part"))
    assert train(cfg4, part, str(tmp_path / "part"), resume=True) == "completed"
    assert [r["step"] for r in part.rows] == [0, 1, 2, 3]
    assert _strip(part.rows) == _strip(full.rows)


def test_one_seed_plays_the_same_first_episodes_whatever_the_algorithm(tiny_model_dir, tmp_path):
    """Building PPO's critic drew random numbers that GRPO's models do not: a PPO-vs-GRPO comparison of one
    seed compared different first rollouts (a tester's Sokoban runs: success 0.125 against 0.0 at step 0)."""
    first_episodes = {}
    for preset in ("starpo", "grpo", "starpo-s"):
        cfg = TrainConfig.preset(preset, "schedule.steps=1", env={"name": "sokoban"}, **SMALL)
        sink = MemorySink()
        train(cfg, sink, str(tmp_path / preset))
        step, samples = sink.sample_rows[0]
        first_episodes[preset] = [(sample["seed"], sample["text"]) for sample in samples]
        assert step == 0 and samples
    assert first_episodes["starpo"] == first_episodes["grpo"] == first_episodes["starpo-s"]


def test_should_stop_checkpoints_and_returns_stopped(tiny_model_dir, tmp_path):
    calls = []
    sink = MemorySink()
    result = train(
        TrainConfig.preset("grpo", env={"name": "bandit"}, **SMALL),
        sink,
        str(tmp_path),
        should_stop=lambda: calls.append(1) or len(calls) > 1,
    )
    assert result == "stopped"
    assert [r["step"] for r in sink.rows] == [0]
    assert sink.checkpoints[-1][0] == 1 and os.path.isdir(sink.checkpoints[-1][1])


def test_nan_loss_skips_the_step_and_counts_it(tiny_model_dir, tmp_path, monkeypatch):
    real = losses.policy_loss

    def nan_loss(*args, **kwargs):
        loss, stats = real(*args, **kwargs)
        return loss * float("nan"), stats

    monkeypatch.setattr(losses, "policy_loss", nan_loss)
    from trainer.models import load_policy

    before = {
        k: v.clone() for k, v in load_policy(TrainConfig().model, False, False).model.state_dict().items()
    }
    sink = MemorySink()
    train(TrainConfig.preset("grpo", env={"name": "bandit"}, **SMALL), sink, str(tmp_path))
    assert all(r["actor/skipped_steps"] >= 1 for r in sink.rows if r["train/filter_kept_ratio"] > 0)
    from transformers import AutoModelForCausalLM

    after = AutoModelForCausalLM.from_pretrained(
        tmp_path / "checkpoints" / "step_000002" / "policy"
    ).state_dict()
    assert all(torch.equal(before[k], after[k]) for k in after)


OTHER_VALUE = {  # a valid value unlike the default, for each field of a kind not halved or negated
    "algorithm.filter_top_p_mode": "softmax",
    "algorithm.kl_estimator": "k3",
    "model.lora_target_modules": ["q_proj"],
}


def another_value(key, value):
    if key in OTHER_VALUE:
        return OTHER_VALUE[key]
    if isinstance(value, bool):
        return not value
    if isinstance(value, int):
        return max(1, value // 2) if value != 1 else 2
    return value / 2 if value else 0.1


@pytest.mark.parametrize(
    "preset,dotted",
    [
        ("grpo", ["algorithm.kl_coef=0", "schedule.val_every=0", "diagnostics.collapse_every=0"]),
        ("starpo-s", ["rollout.temperature=0", "rollout.val_temperature=0"]),
    ],
)
def test_fields_a_config_does_not_read_change_nothing_it_trains(tiny_model_dir, tmp_path, preset, dotted):
    """TrainConfig.inert_fields is what the web app refuses a grid or an override of: every one of them
    changed at once, the run trains as before, metric for metric."""
    from trainer.overrides import flatten, set_dotted

    base = TrainConfig.preset(preset, "deterministic=true", *dotted, env={"name": "bandit"}, **SMALL)
    inert = base.inert_fields()
    assert len(inert) >= (17 if preset == "grpo" else 8)
    values, flat = base.to_dict(), flatten(base.to_dict())
    for key in inert:
        set_dotted(values, key, another_value(key, flat[key]))
    changed = TrainConfig.from_dict(values)
    assert changed != base and changed.inert_fields() == inert
    rows = []
    for name, cfg in (("base", base), ("changed", changed)):
        sink = MemorySink()
        train(cfg, sink, str(tmp_path / name))
        rows.append(_strip(sink.rows))
    assert rows[0] == rows[1]


def test_checkpoints_ahead_of_a_step_are_dropped(tmp_path):
    """A worker writes a checkpoint before its sink stores the steps it follows: its heir drops one ahead of
    the stored steps rather than resume past steps no one stored."""
    from trainer import checkpoint

    root = tmp_path / "checkpoints"
    for step in (2, 3, 4):
        (root / f"step_{step:06d}").mkdir(parents=True)
        (root / f"step_{step:06d}" / "state.json").write_text("{}")
    assert checkpoint.drop_after(str(tmp_path), 3) == [str(root / "step_000004")]
    assert checkpoint.latest(str(tmp_path)) == str(root / "step_000003")
    assert checkpoint.drop_after(str(tmp_path), 3) == []


def test_checkpoints_are_listed_in_step_order_past_six_digits(tmp_path):
    """Steps run to MAX_STEPS (10,000,000) and names pad to six digits: step_1000000 sorted before step_999999
    by name, so the newest (latest, a resume's) was step 999,999 and pruning deleted step 1,000,000."""
    from trainer import checkpoint_files

    root = tmp_path / "checkpoints"
    for step in (999_999, 1_000_000):
        (root / f"step_{step:06d}").mkdir(parents=True)
        (root / f"step_{step:06d}" / "state.json").write_text("{}")
    listed = checkpoint_files.list_checkpoints(str(tmp_path))
    assert [checkpoint_files.step_of(path) for path in listed] == [999_999, 1_000_000]


def _checkpoints(tmp_path, writers: dict[int, str]):
    root = tmp_path / "checkpoints"
    for step, writer in writers.items():
        (root / f"step_{step:06d}").mkdir(parents=True)
        (root / f"step_{step:06d}" / "state.json").write_text(json.dumps({"step": step, "writer": writer}))
    return lambda: sorted(int(path.name.removeprefix("step_")) for path in root.iterdir())


def test_pruning_keeps_the_checkpoint_a_stalled_sink_can_resume_from(tmp_path):
    """A tester's worker trained on while its database was away (its sink stored up to step 15) and kept only
    its 3 newest checkpoints, 30-40: all ahead of the stored steps, so its heir dropped them and began at 0."""
    from trainer import checkpoint

    left = _checkpoints(tmp_path, {step: "a" for step in (10, 15, 20, 25, 30, 35, 40)})
    checkpoint.prune(str(tmp_path), 3, "a", since=0, resumable=15)
    assert left() == [15, 30, 35, 40]
    checkpoint.prune(str(tmp_path), 3, "a", since=0, resumable=None)  # every step stored (a synchronous sink)
    assert left() == [30, 35, 40]


def test_pruning_leaves_alone_the_checkpoints_of_the_attempt_that_took_the_run_over(tmp_path):
    """An attempt that lost its run without knowing (its database away) deleted its heir's checkpoints by
    keeping the newest names; now it deletes only its own and those from before it started."""
    from trainer import checkpoint

    left = _checkpoints(
        tmp_path, {5: "old", 10: "zombie", 20: "heir", 25: "heir", 60: "zombie", 65: "zombie"}
    )
    checkpoint.prune(str(tmp_path), 2, "zombie", since=10, resumable=None)
    assert left() == [20, 25, 60, 65]  # 5: before it started; 10: its own; the heir's untouched
    checkpoint.prune(str(tmp_path), 2, "heir", since=15, resumable=25)
    assert left() == [20, 25, 60, 65]  # the zombie's are ahead of where the heir started


def test_docs_contracts_lists_every_method_of_the_sink_protocol():
    """docs/CONTRACTS.md's Sink showed four methods; the loop also calls records (train/reward_std_hist)
    and stored_step, so a sink written from it failed at its first step."""
    import re
    from pathlib import Path

    from trainer.sink import Sink

    contracts = (Path(__file__).resolve().parents[2] / "docs" / "CONTRACTS.md").read_text()
    block = contracts.split("class Sink(Protocol):", 1)[1].split("```", 1)[0]
    documented = set(re.findall(r"def (\w+)\(", block))
    protocol = {name for name in vars(Sink) if not name.startswith("_") and callable(getattr(Sink, name))}
    assert documented == protocol
