"""Score the detector on a labelled set of metric histories (tests/data/detector/).

labels.json maps each file name in the folder to its label:
    {"runs": {"frozenlake-ppo-s0.csv": {"collapse": true, "half_peak_step": 91, ...}, ...}}
`half_peak_step` (collapsing runs only) is the first step after the peak where success is below half
of its peak. Other keys (source, case, note) are for people. Adding a run = adding a file and a label.
Runs of our own trainer live in the subfolder real/ with their own real/labels.json (same format; the
top-level labels.json is rewritten by make_synthetic.py); they load as "real/<file>".

An alarm is any warning or collapse event. A collapse is caught when an alarm comes strictly before
`half_peak_step`; its lead is the number of steps between the two.
"""

import bisect
import json
import math
import os
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .detector import Detector, Event
from .series import Series, load_series


def centred_average(xs: list[float], k: int = 5) -> list[float]:
    """Each value's centred k-step moving average (shorter windows at the ends): the smoothing the real
    runs' labels are decided with (bench/real_runs.py), one step's success being a noisy estimate."""
    h = k // 2
    windows = [xs[max(0, i - h) : i + h + 1] for i in range(len(xs))]
    return [sum(w) / len(w) for w in windows]


@dataclass
class LabelledRun:
    name: str
    series: Series
    collapse: bool
    half_peak_step: int | None

    def success_at(self, step: int) -> tuple[float, float] | None:
        """(the 5-step centred average of train/success at the last value logged at or before `step`,
        its best up to there), the smoothing bench/real_runs.py labels with; None before the run's first
        success value or when it logs none (a reward-only run). Non-finite values are skipped."""
        points = [(t, v[SUCCESS]) for t, v in self.series if SUCCESS in v and math.isfinite(v[SUCCESS])]
        i = bisect.bisect_right([t for t, _ in points], step) - 1
        if i < 0:
            return None
        averages = centred_average([x for _, x in points[: i + 3]])
        return averages[i], max(averages[: i + 1])

    def raw_success(self, step: int) -> float | None:
        """The train/success logged at `step`, if any."""
        return next((v.get(SUCCESS) for t, v in self.series if t == step), None)


ALARMS = ("warning", "collapse")  # info markers and resolutions are not alarms
SUCCESS = "train/success"
HELD = 0.75  # an alarm comes "while success held" when its 5-step average is at least this share of its best
# A collapse whose success halves before this step broke at once: before any rule has seen the
# min_steps (10 by default) it needs to judge, so no alarm can come first; it is counted for its collapse
# event, and the benchmark reports the later collapses, the ones a lead can be asked of, on their own.
JUDGED_FROM = 10


@dataclass
class RunResult:
    run: LabelledRun
    events: list[Event]

    def alarms(self, rule: str | None = None) -> list[Event]:
        """Warning and collapse events, of one rule or of all."""
        return [e for e in self.events if e["level"] in ALARMS and rule in (None, e["rule"])]

    def first_alarm_of(self, rule: str | None = None) -> int | None:
        return next((e["step"] for e in self.alarms(rule)), None)

    def lead_of(self, rule: str | None = None) -> int | None:
        """Steps from the first alarm to the half-peak point; None when there was no alarm."""
        first = self.first_alarm_of(rule)
        if not self.run.collapse or first is None:
            return None
        if self.run.half_peak_step is None:
            raise ValueError(f"{self.run.name}: a collapsing run needs half_peak_step in its label")
        return self.run.half_peak_step - first

    @property
    def first_alarm(self) -> int | None:
        return self.first_alarm_of()

    @property
    def collapse_events(self) -> list[Event]:
        return [e for e in self.events if e["level"] == "collapse"]

    @property
    def lead(self) -> int | None:
        return self.lead_of()

    @property
    def warned_while_success_held(self) -> bool:
        """A healthy run's first alarm came while success held (see HELD), not in a fall it came back
        from: the alarm the issue calls crying wolf. A run without success at its alarm counts as
        held: what cannot be told apart counts against the detector."""
        first = self.first_alarm
        if self.run.collapse or first is None:
            return False
        at = self.run.success_at(first)
        return at is None or at[0] >= HELD * at[1]

    @property
    def broke_at_once(self) -> bool:
        return (
            self.run.collapse
            and self.run.half_peak_step is not None
            and self.run.half_peak_step < JUDGED_FROM
        )

    @property
    def source(self) -> str:
        return "real" if self.run.name.startswith("real/") else "synthetic"


def load_labels(folder: str | os.PathLike[str]) -> dict[str, dict[str, Any]]:
    """{name: label} of the folder's labels.json and, when present, real/labels.json (names "real/<file>")."""
    root = Path(folder)
    labels = json.loads((root / "labels.json").read_text())["runs"]
    real = root / "real" / "labels.json"
    if real.exists():
        labels.update({f"real/{name}": label for name, label in json.loads(real.read_text())["runs"].items()})
    return labels


def load_labelled_set(folder: str | os.PathLike[str]) -> list[LabelledRun]:
    root = Path(folder)
    return [
        LabelledRun(name, load_series(root / name), label["collapse"], label.get("half_peak_step"))
        for name, label in sorted(load_labels(root).items())
    ]


def score(runs: list[LabelledRun], overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """Run a fresh detector over every run; returns the per-run results and the summary numbers."""
    results = [RunResult(run, Detector.replay(run.series, overrides)[1]) for run in runs]
    return {"results": results, **summarize(results)}


def summarize(results: list[RunResult], rule: str | None = None) -> dict[str, Any]:
    """The quality numbers over `results`, counting the alarms of `rule` only, or of every rule (None).

    caught_in_time: collapsing runs with an alarm strictly before the half-peak step; their leads give
    median_lead and min_lead. healthy_with_warning: healthy runs with any alarm; healthy_with_collapse_event:
    healthy runs with a collapse event (a false collapse); collapses_with_collapse_event: collapsing runs
    that got a collapse event at any step (the email that says the run is lost, in time or not).
    """
    collapsing = [r for r in results if r.run.collapse]
    healthy = [r for r in results if not r.run.collapse]
    leads = [lead for r in collapsing if (lead := r.lead_of(rule)) is not None and lead > 0]
    false_alarms = [r for r in healthy if r.alarms(rule)]
    collapse_events = [r for r in results if any(e["level"] == "collapse" for e in r.alarms(rule))]
    collapses_with_event = sum(1 for r in collapse_events if r.run.collapse)
    return {
        "collapsing_runs": len(collapsing),
        "healthy_runs": len(healthy),
        "caught_in_time": len(leads),
        "recall": len(leads) / len(collapsing) if collapsing else None,
        "precision": len(leads) / (len(leads) + len(false_alarms)) if leads or false_alarms else None,
        "healthy_with_warning": len(false_alarms),
        "healthy_with_collapse_event": sum(1 for r in collapse_events if not r.run.collapse),
        "collapses_with_collapse_event": collapses_with_event,
        "collapse_event_recall": collapses_with_event / len(collapsing) if collapsing else None,
        "median_lead": statistics.median(leads) if leads else None,
        "min_lead": min(leads) if leads else None,
    }
