"""Runs logged by other trainers under their own key names and habits (RAGEN-2, TRL, veRL), as the web app
and `python -m diagnostics` judge them: the keys those trainers log feed the rules that read our keys."""

import json
import random

from diagnostics import Detector, aliases, metrics
from diagnostics.__main__ import main


def judged(rows):
    return Detector.replay(rows)[1]


def ragen2_run(seed, names):
    """A RAGEN-2 run (veRL's keys, RAGEN's `train/<env>/success`): it learns, then its first-turn reasoning
    stops depending on the prompt (MI and retrieval above chance fall, entropy stays up) from step 60, and
    its reward falls from step 85. The template-collapse metrics come every 5 steps, under `names`."""
    rng = random.Random(seed)
    rows = []
    for step in range(1, 121):
        level = 0.1 + 0.6 * min(1.0, step / 30)
        if step > 85:
            level = max(0.1, level - 0.6 * (step - 85) / 15)
        score = sum(rng.random() < level for _ in range(128)) / 128
        row = {
            "critic/score/mean": score,
            "train/SimpleSokoban/success": score,
            "actor/entropy": 1.2 + rng.gauss(0, 0.02),
            "actor/grad_norm": 0.3 * rng.lognormvariate(0, 0.2),
        }
        if step % 5 == 0:
            fading = min(1.0, max(0.0, (step - 60) / 20))
            row[names["mi"]] = 0.6 - 0.55 * fading + rng.gauss(0, 0.02)
            row[names["above"]] = 0.5 - 0.5 * fading + rng.gauss(0, 0.02)
        rows.append((step, row))
    return rows


OURS = {"mi": "collapse/mi_estimate", "above": "collapse/retrieval_above_chance"}
RAGEN2 = {
    "mi": "collapse_first_turn_sample/mi_estimate",
    "above": "collapse_first_turn_sample/retrieval_above_chance",
}


def test_ragen2s_template_collapse_metrics_feed_the_template_collapse_rule(tmp_path, capsys):
    # RAGEN-2 computes collapse/mi_estimate and collapse/retrieval_above_chance but logs them under the
    # sampling's name (collapse_first_turn_sample/...). Read as they were, template_collapse had no data on
    # a RAGEN-2 run: it warned only under our own names.
    for seed in range(3):
        ours = judged(ragen2_run(seed, OURS))
        assert "template_collapse" in [e["rule"] for e in ours]
        theirs = judged(ragen2_run(seed, RAGEN2))
        assert theirs == ours
    # The command line reads the exported file the same way.
    path = tmp_path / "ragen2.jsonl"
    path.write_text("".join(json.dumps({"step": step, **row}) + "\n" for step, row in ragen2_run(0, RAGEN2)))
    assert main([str(path)]) == 0
    printed = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(e["step"], e["rule"]) for e in printed] == [
        (e["step"], e["rule"]) for e in judged(ragen2_run(0, OURS))
    ]


def ragen_run_losing_its_start(seed, success_key):
    """A RAGEN Bandit run (veRL's keys and RAGEN's per-environment success): an untrained model that answers
    in format, succeeding 45% of the time, whose replies all leave the format at step 8 (success 0, and
    RAGEN's format penalty of -0.1 makes the reward negative)."""
    rng = random.Random(seed)
    rows = []
    for step in range(1, 61):
        broken = step > 7
        wins = sum(rng.random() < (0.0 if broken else 0.45) for _ in range(32))
        rows.append(
            (
                step,
                {
                    "critic/score/mean": (wins - (3.2 if broken else 0.0)) / 32,
                    success_key: wins / 32,
                    "actor/entropy": 0.9 + rng.gauss(0, 0.02),
                    "actor/grad_norm": 0.3,
                },
            )
        )
    return rows


def test_ragens_per_environment_success_is_the_runs_success():
    # RAGEN logs success as train/<env tag>/success. Not read, the run was judged on its mean reward, whose
    # scale means nothing, so "lost its start" (a success rate's test) was not judged: no event at all,
    # where the same run logging train/success gets a collapse event 7-8 steps after the break.
    for seed in range(3):
        ours = judged(ragen_run_losing_its_start(seed, "train/success"))
        assert [e["level"] for e in ours] == ["collapse"]
        assert judged(ragen_run_losing_its_start(seed, "train/Bandit/success")) == ours


def test_two_training_environments_success_is_not_read_as_the_runs():
    # RAGEN can train on several environments at once: each logs its own train/<env>/success, and neither
    # is the run's success. The run is judged on its mean reward, as before.
    both = {"train/Bandit/success": 0.5, "train/SimpleSokoban/success": 0.1, "critic/score/mean": 0.3}
    assert aliases.canonical(both) == {
        "train/Bandit/success": 0.5,
        "train/SimpleSokoban/success": 0.1,
        "train/reward_mean": 0.3,
    }
    assert aliases.canonical({"train/Bandit/success": 0.5}) == {"train/success": 0.5}
    # Our own pattern key (validation success per environment) is ours, not an alias.
    assert aliases.canonical({"val/bandit/success": 0.5}) == {"val/bandit/success": 0.5}
    # And a per-environment success is a fraction wherever it comes in.
    assert metrics.out_of_bounds("train/Bandit/success", 7.5) is not None
