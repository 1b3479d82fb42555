"""The live detector: feed it one step of metrics at a time, get back the alerts that changed state.

Alerting follows Grafana: a rule's condition must hold for `pending` consecutive evaluations before
the alert fires, fires once when it enters that state, and resolves once the condition has been clear
for `recovery` consecutive evaluations. A step without the rule's metric is not an evaluation.

Restarts: the detector is a pure function of the steps fed to it, in order. A worker that restarts
mid-run rebuilds it with `Detector.replay(history)` from the stored metrics and continues; the events
replay returns are the ones already sent.
"""

import dataclasses
import math
from collections.abc import Iterable, Mapping
from typing import Any

from .aliases import ALIASES, alias_of, canonical
from .quoting import quoted
from .rules import READS, RULES, CollapseParams, Metrics, Rule, RuleParams, SuccessTrend

# An alert that changed state: step, level, rule, message and signals, as workers store and send it.
Event = dict[str, Any]

# Past this size a value is an overflow in all but name (a gradient norm of 1e200, an entropy of 1e155):
# the rules' sums and squares of it would overflow (Python raises for those), so it is judged as the
# infinity it is on its way to: no data for most rules, a spike for grad_spike. Real metrics stay far below.
OVERFLOW = 1e100


def _overflowed(value: float) -> float:
    return math.copysign(math.inf, value) if abs(value) > OVERFLOW else value


class Alert:
    """One rule's state: normal or firing, and how long the condition has argued for a change."""

    def __init__(self, rule: Rule) -> None:
        self.rule = rule
        self.firing = False
        self.streak = 0  # consecutive evaluations whose verdict differs from the current state
        self.streak_start: int | None = None

    def update(self, step: int, metrics: Metrics, trend: SuccessTrend) -> Event | None:
        check = self.rule.check(metrics, trend)
        if check is None:
            return None
        if check.breached == self.firing:
            self.streak = 0
            return None
        if self.streak == 0:
            self.streak_start = step
        self.streak += 1
        needed = self.rule.params.recovery if self.firing else self.rule.params.pending
        if self.streak < needed or check.held:
            return None
        # A guarded warning whose signal was breached long before the guard let it fire says since when.
        held = check.breached and self.streak > needed
        self.firing, self.streak = check.breached, 0
        headline = self.rule.headline()
        title = headline if self.firing else f"Resolved: {headline.lower()}"
        since = (
            f" (breached since step {self.streak_start}, held by the success guard until now)" if held else ""
        )
        return {
            "step": step,
            "level": self.rule.level if self.firing else "resolved",
            "rule": self.rule.name,
            "message": f"{title}: {check.summary}{since}",
            "signals": {**check.signals, "since_step": self.streak_start},
        }


class Detector:
    def __init__(self, overrides: Mapping[str, Any] | None = None) -> None:
        self.params = build_params(overrides or {})
        self.alerts = [Alert(RULES[name](params)) for name, params in self.params.items() if params.enabled]
        self.trend = SuccessTrend()
        self.last_step: int | None = None

    @classmethod
    def replay(
        cls, history: Iterable[tuple[int, Mapping[str, Any]]], overrides: Mapping[str, Any] | None = None
    ) -> tuple["Detector", list[Event]]:
        """Rebuild a detector from stored (step, metrics) pairs; returns (detector, events)."""
        detector = cls(overrides)
        events = [event for step, metrics in history for event in detector.update(step, metrics)]
        return detector, events

    def update(self, step: int, metrics: Mapping[str, Any]) -> list[Event]:
        """Judge one step; returns the events it caused (usually none). Steps must increase."""
        if isinstance(step, bool) or not isinstance(step, int):
            raise ValueError(f"step: {quoted(step)} is not an integer")
        if self.last_step is not None and step <= self.last_step:
            raise ValueError(f"step {step} is not after the previous step {self.last_step}")
        self.last_step = step
        values = {key: _overflowed(value) for key, value in canonical(metrics).items()}
        self.trend.update(values)
        return [event for alert in self.alerts if (event := alert.update(step, values, self.trend))]


# Every stored key that can reach a rule: READS under our names and under the other trainers' names that
# canonical() renames to them. A replay that loads a run's stored points may load only these.
STORED_READS = READS | {foreign for foreign, ours in ALIASES.items() if ours in READS}


def stored_reads(keys: Iterable[str]) -> list[str]:
    """Those of a run's stored `keys` that can reach a rule: STORED_READS, and names that match a pattern
    alias of a key a rule reads (RAGEN's train/<env>/success)."""
    return [key for key in keys if key in STORED_READS or alias_of(key) in READS]


def replay_inputs(
    history: Iterable[tuple[int, Mapping[str, Any]]], overrides: Mapping[str, Any] | None = None
) -> tuple[list[Event], list[dict[str, Any]]]:
    """`Detector.replay`, also returning what each enabled rule judged: the series its EMA held after
    every step that gave it a value, the number its signals quote as "value". One dict per rule, in the
    detector's order: {rule, metric, smoothing, step: [...], value: [...]}. The events are replay's."""
    detector = Detector(overrides)
    rules = [alert.rule for alert in detector.alerts]
    steps: list[list[int]] = [[] for _ in rules]
    values: list[list[float]] = [[] for _ in rules]
    events: list[Event] = []
    for step, metrics in history:
        before = [rule.ema.updates for rule in rules]
        events.extend(detector.update(step, metrics))
        for index, rule in enumerate(rules):
            if rule.ema.updates != before[index] and rule.ema.value is not None:
                steps[index].append(step)
                values[index].append(rule.ema.value)
    inputs = [
        {"rule": rule.name, "metric": rule.metric, "smoothing": rule.params.smoothing, "step": s, "value": v}
        for rule, s, v in zip(rules, steps, values)
    ]
    return events, inputs


def fewest_steps_for_a_collapse(overrides: Mapping[str, Any] | None = None) -> int | None:
    """How many steps of its outcome a run needs before the collapse rule can call a collapse: it judges
    from its min_steps-th value and a breach must hold `pending` values. None when the rule is off."""
    params = build_params(overrides or {})["collapse"]
    assert isinstance(params, CollapseParams)
    return params.min_steps + params.pending - 1 if params.enabled else None


def build_params(overrides: Any) -> dict[str, RuleParams]:
    """Every rule's Params with the overrides applied; ValueError names `rule.param` on bad input."""
    if not isinstance(overrides, dict):
        raise ValueError(f"overrides: expected an object of rule -> parameters, got {quoted(overrides)}")
    unknown = set(overrides) - set(RULES)
    if unknown:
        raise ValueError(f"{sorted(unknown)[0]}: unknown rule (known: {', '.join(RULES)})")
    return {name: _apply(name, rule.Params, overrides.get(name, {})) for name, rule in RULES.items()}


def _apply(rule: str, params_class: type[RuleParams], given: Any) -> RuleParams:
    if not isinstance(given, dict):
        raise ValueError(f"{rule}: expected an object of parameter -> value, got {quoted(given)}")
    fields = {f.name: f for f in dataclasses.fields(params_class)}
    for name, value in given.items():
        where = f"{rule}.{name}"
        if name not in fields:
            raise ValueError(f"{where}: unknown parameter (known: {', '.join(fields)})")
        _validate(where, fields[name], value)
    return params_class(**given)


def _validate(where: str, field: dataclasses.Field[Any], value: Any) -> None:
    kind: type[Any] = type(field.default)
    # bool is an int in Python; a checkbox value in a number field is still a mistake.
    accepted = (int, float) if kind is float else (kind,)
    if isinstance(value, bool) != (kind is bool) or not isinstance(value, accepted):
        raise ValueError(f"{where}: expected {kind.__name__}, got {quoted(value)}")
    if not math.isfinite(value):
        raise ValueError(f"{where}: must be a finite number, got {quoted(value)}")
    low, high = field.metadata["min"], field.metadata["max"]
    if low is not None and value < low:
        raise ValueError(f"{where}: must be >= {low}, got {quoted(value)}")
    if high is not None and value > high:
        raise ValueError(f"{where}: must be <= {high}, got {quoted(value)}")


def rule_params() -> dict[str, dict[str, Any]]:
    """Each rule's level, purpose and parameters (name, type, default, min, max, help), for forms."""
    return {
        name: {
            "level": rule.level,
            "help": (rule.__doc__ or "").strip().splitlines()[0],
            "params": [
                {
                    "name": f.name,
                    "type": type(f.default).__name__,
                    "default": f.default,
                    "min": f.metadata["min"],
                    "max": f.metadata["max"],
                    "help": f.metadata["help"],
                }
                for f in dataclasses.fields(rule.Params)
            ],
        }
        for name, rule in RULES.items()
    }
