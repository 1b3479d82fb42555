"""replay_inputs: the series each rule judged, from the detector's own code, with the same events as
Detector.replay; the value an event quotes is that series' value at the event's step."""

import math
from pathlib import Path

import pytest

from diagnostics import Detector, load_series, replay_inputs
from diagnostics.detector import stored_reads

FOLDER = Path(__file__).resolve().parents[1] / "data" / "detector"
FILES = sorted(p.name for p in FOLDER.iterdir() if p.suffix in (".csv", ".jsonl"))
REAL = sorted(p.name for p in (FOLDER / "real").iterdir() if p.suffix in (".csv", ".jsonl"))
ALL = FILES + [f"real/{name}" for name in REAL]


@pytest.fixture(scope="module")
def replays():
    return {name: replay_inputs(load_series(FOLDER / name)) for name in ALL}


def test_the_events_are_replays_on_every_labelled_run(replays):
    for name, (events, _) in replays.items():
        assert events == Detector.replay(load_series(FOLDER / name))[1], name


def test_every_quoted_value_is_the_judged_series_at_the_event_step(replays):
    quoted = set()
    for name, (events, inputs) in replays.items():
        by_rule = {entry["rule"]: dict(zip(entry["step"], entry["value"])) for entry in inputs}
        for event in events:
            value = event["signals"].get("value")
            if isinstance(value, float):  # a NaN gradient norm quotes "nan", which no chart draws
                assert by_rule[event["rule"]][event["step"]] == value, (name, event)
                quoted.add(event["rule"])
    # The labelled set makes most rules speak; each of those is checked above.
    assert {"collapse", "reward_std_drop", "zero_std_groups", "thinking_decay"} <= quoted


def test_each_series_is_the_rules_ema_of_its_metric_with_the_runs_smoothing():
    history = [(step, {"actor/entropy": 1.0 + (step % 3), "train/success": 0.1}) for step in range(8)]
    history[4][1]["actor/entropy"] = math.nan  # no value: not a point of the series, and no move
    _, inputs = replay_inputs(history, {"entropy_rise": {"smoothing": 0.5}})
    by_rule = {entry["rule"]: entry for entry in inputs}
    erratic, rise = by_rule["entropy_erratic"], by_rule["entropy_rise"]
    assert erratic["metric"] == rise["metric"] == "actor/entropy"
    assert (erratic["smoothing"], rise["smoothing"]) == (0.0, 0.5)
    assert erratic["step"] == rise["step"] == [0, 1, 2, 3, 5, 6, 7]
    assert erratic["value"] == [1.0, 2.0, 3.0, 1.0, 3.0, 1.0, 2.0]  # smoothing 0: the values themselves
    expected, smoothed = [], None
    for x in erratic["value"]:
        smoothed = x if smoothed is None else 0.5 * smoothed + 0.5 * x
        expected.append(smoothed)
    assert rise["value"] == expected
    assert by_rule["collapse"]["metric"] == "train/success"
    assert "grad_spike" in by_rule and by_rule["grad_spike"]["step"] == []  # never logged: no points


def test_a_disabled_rule_has_no_series():
    _, inputs = replay_inputs([(0, {"train/success": 0.5})], {"collapse": {"enabled": False}})
    assert "collapse" not in [entry["rule"] for entry in inputs]


def test_keys_outside_stored_reads_change_no_event():
    for name in ALL:
        series = load_series(FOLDER / name)
        kept = [(step, {k: values[k] for k in stored_reads(values)}) for step, values in series]
        kept = [(step, values) for step, values in kept if values]
        assert Detector.replay(kept)[1] == Detector.replay(series)[1], name
