"""The registry of metric keys (diagnostics/metrics.py): what reads it finds its keys there, the docs' key
tables are the registry's, and every key the trainer writes is registered."""

from pathlib import Path

import pytest

from diagnostics import metrics, metrics_tables, rules
from diagnostics.aliases import ALIASES, alias_of, canonical

DOCS = Path(__file__).resolve().parents[2] / "docs"


def test_docs_key_tables_are_the_registrys():
    found = set()
    for name in metrics_tables.DOC_FILES:
        text = (DOCS / name).read_text()
        found |= {block.group(2) for block in metrics_tables.BLOCK.finditer(text)}
        assert metrics_tables.update(text) == text, (
            f"docs/{name} is out of date with diagnostics/metrics.py: run python -m diagnostics.metrics_tables --write"
        )
    assert found == set(metrics_tables.TABLES)


def test_every_known_as_name_not_marked_otherwise_is_renamed_to_its_key():
    """docs/METRICS.md: '"Known as" names, except those marked "not renamed" ..., are renamed to ours'. RAGEN's
    `*/success` was listed unmarked, but nothing renames it (an imported `bandit/success` keeps its name)."""
    import re

    table = (DOCS / "METRICS.md").read_text().split("<!-- metrics table: trainer -->", 1)[1]
    table = table.split("<!-- end metrics table -->", 1)[0]
    checked = 0
    for row in table.splitlines()[3:]:
        cells = [cell.strip() for cell in row.strip().strip("|").split("|")]
        key, known_as = cells[0].strip("`"), cells[-1]
        for name in re.finditer(r"`([^`]+)`( \(([^)]*)\))?", known_as):
            if "not renamed" in (name.group(3) or ""):
                continue
            checked += 1
            assert (alias_of(name.group(1)) or name.group(1)) == key, (key, name.group(1))
    assert checked >= 15


def test_a_stale_table_is_rewritten_and_an_unknown_one_refused():
    stale = "intro\n<!-- metrics table: collapse -->\n| old |\n<!-- end metrics table -->\noutro\n"
    updated = metrics_tables.update(stale)
    assert "| old |" not in updated and "`collapse/mi_estimate`" in updated
    assert updated.startswith("intro\n") and updated.endswith("<!-- end metrics table -->\noutro\n")
    with pytest.raises(ValueError, match="'nope'"):
        metrics_tables.update("<!-- metrics table: nope -->\n<!-- end metrics table -->\n")


def test_keys_are_unique_and_every_chart_draws_some():
    assert len(metrics.BY_KEY) == len(metrics.METRICS)
    for chart in (*metrics.CHART_ORDER, metrics.VAL_ENV_CHART):
        metrics.chart_log(chart)  # raises when its metrics disagree on the axis or it has none
    assert {m.chart for m in metrics.METRICS if m.chart} == {*metrics.CHART_ORDER, metrics.VAL_ENV_CHART}


def test_aliases_rename_to_registered_keys_and_never_shadow_ours():
    spellings = [
        s
        for m in metrics.METRICS
        for a in m.aliases
        if a.renamed and not a.is_pattern
        for s in a.spellings()
        if s != m.key
    ]
    assert len(spellings) == len(set(spellings)) == len(ALIASES)  # no name renamed to two keys
    for pattern, ours in metrics.PATTERN_ALIASES:
        assert ours in metrics.BY_KEY and not any(pattern.fullmatch(key) for key in metrics.BY_KEY)
    for foreign, ours in ALIASES.items():
        assert metrics.registered(foreign) is None, f"{foreign} is our own key"
        assert ours in metrics.BY_KEY
    trl = next(a for a in metrics.BY_KEY[metrics.TRAIN_REWARD_MEAN].aliases if a.source == metrics.TRL)
    assert (
        canonical({trl.name: 1.0})
        == canonical({"train/" + trl.name: 1.0})
        == {metrics.TRAIN_REWARD_MEAN: 1.0}
    )


def test_a_fractions_bounds_hold_under_its_aliases_and_let_no_data_through():
    assert metrics.out_of_bounds("train/success", 107.5) == (
        "must be between 0 and 1 (train/success is a fraction), got 107.5"
    )
    assert metrics.out_of_bounds("train/success", 85).endswith("got 85; a percentage? send it divided by 100")
    assert metrics.out_of_bounds("success_rate", -0.5)  # another trainer's name for it
    assert metrics.out_of_bounds("val/frozenlake/success", 1.5)  # a pattern's key
    for fine in (0.0, 1.0, 1.005, float("nan"), float("inf")):  # half precision's rounding; NaN/inf are gaps
        assert metrics.out_of_bounds("train/success", fine) is None
    assert metrics.out_of_bounds("train/reward_mean", -5.0) is None  # a reward has no bounds
    assert metrics.out_of_bounds("collapse/retrieval_above_chance", -0.4) is None  # a difference of fractions
    assert metrics.out_of_bounds("my/own", 7.5) is None


def test_pattern_keys_are_found_with_any_one_part():
    entry = metrics.BY_KEY[metrics.VAL_ENV_SUCCESS]
    assert metrics.registered(entry.fill(env="sokoban")) is entry
    assert metrics.registered("val/sokoban/success") is entry
    assert metrics.registered("val/success") is metrics.BY_KEY[metrics.VAL_SUCCESS]
    assert metrics.registered("val/a/b/success") is None
    assert metrics.registered("val//success") is None
    chart = metrics.val_env_charts(["sokoban"])[0]
    assert chart["keys"] == ["val/sokoban/success"] and "sokoban" in chart["title"]


def test_the_detector_reads_registered_keys():
    read = {rule.metric for rule in vars(rules).values() if isinstance(getattr(rule, "metric", None), str)}
    read.discard("")  # rules that take the success trend's key
    assert read and all(key in metrics.BY_KEY for key in read | set(metrics.OUTCOME_KEYS))


# Every feature that adds keys: PPO (critic) and GRPO, KL to the reference (in the reward for PPO, in the
# loss for GRPO), the StarPO-S filter, validation in more environments, template collapse every step.
EVERY_FEATURE = {
    "env": {"name": "bandit"},
    "algorithm": {"kl_coef": 0.001, "filter_ratio": 0.5},
    "rollout": {
        "env_groups": 2,
        "group_size": 2,
        "max_turns": 1,
        "max_new_tokens": 24,
        "val_seeds": 2,
        "val_envs": ["bandit", "frozenlake"],
    },
    "optim": {"mini_batch_size": 4, "micro_batch_size": 2},
    "schedule": {"steps": 2, "val_every": 1, "checkpoint_every": 0, "samples_per_step": 0},
    "diagnostics": {"collapse_every": 1, "collapse_traj_samples": 64},
}


def test_every_key_the_trainer_writes_is_registered(tiny_model_dir, tmp_path):
    from trainer.config import TrainConfig
    from trainer.loop import train
    from trainer.sink import MemorySink

    written: set[str] = set()
    for preset in ("starpo-s", "starpo-s-grpo"):
        sink = MemorySink()
        assert train(TrainConfig.preset(preset, **EVERY_FEATURE), sink, str(tmp_path / preset)) == "completed"
        written |= {key for row in sink.rows for key in row if key != "step"}
        # a fraction's bounds hold for what the trainer writes: the ingest refuses values past them
        outside = [
            (key, value)
            for row in sink.rows
            for key, value in row.items()
            if metrics.out_of_bounds(key, value)
        ]
        assert not outside, outside
        written |= {key for _, key, _ in sink.record_rows}  # lists kept whole (Sink.records)
    unregistered = sorted(key for key in written if metrics.registered(key) is None)
    assert not unregistered, f"register these keys in diagnostics/metrics.py: {unregistered}"
    # and the registry lists no key the trainer no longer writes (but those it writes on a GPU only)
    drawn = {metrics.registered(key).key for key in written}
    assert drawn | {metrics.PERF_MAX_MEMORY_ALLOCATED_GB, metrics.PERF_MAX_MEMORY_RESERVED_GB} == set(
        metrics.BY_KEY
    )
