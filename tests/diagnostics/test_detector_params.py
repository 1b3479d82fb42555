"""Overrides are validated and name `rule.param`; rule_params() describes every parameter for forms."""

import re

import pytest

from diagnostics import Detector, rule_params
from diagnostics.rules import RULES


def test_overrides_change_the_parameters():
    det = Detector({"grad_spike": {"tolerance": 5.0}, "thinking_decay": {"enabled": False}})
    assert det.params["grad_spike"].tolerance == 5.0
    assert "thinking_decay" not in {alert.rule.name for alert in det.alerts}
    defaults = {p["name"]: p["default"] for p in rule_params()["collapse"]["params"]}
    assert det.params["collapse"].pending == defaults["pending"]


def test_an_int_is_accepted_for_a_float():
    assert Detector({"grad_spike": {"tolerance": 5}}).params["grad_spike"].tolerance == 5


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"grad_spikes": {}}, "grad_spikes: unknown rule"),
        ({"grad_spike": {"tol": 5.0}}, "grad_spike.tol: unknown parameter"),
        ({"grad_spike": {"tolerance": "5"}}, "grad_spike.tolerance: expected float, got '5'"),
        ({"grad_spike": {"tolerance": True}}, "grad_spike.tolerance: expected float, got True"),
        ({"grad_spike": {"tolerance": float("nan")}}, "grad_spike.tolerance: must be a finite number"),
        ({"grad_spike": {"tolerance": -1.0}}, "grad_spike.tolerance: must be >= 0.0"),
        ({"collapse": {"pending": 2.5}}, "collapse.pending: expected int, got 2.5"),
        ({"collapse": {"pending": 0}}, "collapse.pending: must be >= 1"),
        ({"collapse": {"fraction": 1.5}}, "collapse.fraction: must be <= 1.0"),
        ({"collapse": {"enabled": 1}}, "collapse.enabled: expected bool, got 1"),
        ({"collapse": [1]}, "collapse: expected an object"),
        ([1], "overrides: expected an object"),
    ],
)
def test_bad_overrides_name_the_rule_and_parameter(overrides, message):
    with pytest.raises(ValueError, match=re.escape(message)):
        Detector(overrides)


def test_rule_params_lists_every_rule_and_parameter_with_defaults_and_help():
    described = rule_params()
    assert set(described) == set(RULES)
    for name, rule in described.items():
        assert rule["level"] in ("info", "warning", "collapse") and rule["help"]
        defaults = Detector().params[name]
        for p in rule["params"]:
            assert p["help"], f"{name}.{p['name']} has no help"
            assert getattr(defaults, p["name"]) == p["default"]
            assert p["type"] in ("bool", "int", "float")
    assert described["collapse"]["level"] == "collapse"
    assert {"tolerance", "window", "pending", "recovery", "smoothing", "enabled"} <= {
        p["name"] for p in described["grad_spike"]["params"]
    }


def test_every_rule_that_warns_says_what_to_try_and_the_docs_say_the_same():
    from pathlib import Path

    from diagnostics.rules import RULES

    docs = (Path(__file__).resolve().parents[2] / "docs" / "DETECTOR.md").read_text()
    for name, rule in RULES.items():
        assert bool(rule.remedy) == (rule.level != "info"), name  # an info marker asks nothing of anyone
        assert (
            not rule.remedy
            or f"*What to try* (in the alert email of a run trained here too): {rule.remedy}\n" in docs
        ), name
