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

import json
import statistics
from dataclasses import dataclass
from pathlib import Path

from .detector import Detector
from .series import load_series


@dataclass
class LabelledRun:
    name: str
    series: list
    collapse: bool
    half_peak_step: int | None


@dataclass
class RunResult:
    run: LabelledRun
    events: list

    @property
    def first_alarm(self):
        return next((e["step"] for e in self.events if e["level"] in ("warning", "collapse")), None)

    @property
    def collapse_events(self):
        return [e for e in self.events if e["level"] == "collapse"]

    @property
    def lead(self):
        """Steps from the first alarm to the half-peak point; None when there was no alarm."""
        if not self.run.collapse or self.first_alarm is None:
            return None
        return self.run.half_peak_step - self.first_alarm


def load_labels(folder):
    """{name: label} of the folder's labels.json and, when present, real/labels.json (names "real/<file>")."""
    folder = Path(folder)
    labels = json.loads((folder / "labels.json").read_text())["runs"]
    real = folder / "real" / "labels.json"
    if real.exists():
        labels.update({f"real/{name}": label for name, label in json.loads(real.read_text())["runs"].items()})
    return labels


def load_labelled_set(folder):
    folder = Path(folder)
    return [
        LabelledRun(name, load_series(folder / name), label["collapse"], label.get("half_peak_step"))
        for name, label in sorted(load_labels(folder).items())
    ]


def score(runs, overrides=None):
    """Run a fresh detector over every run; returns the per-run results and the summary numbers."""
    results = [RunResult(run, Detector.replay(run.series, overrides)[1]) for run in runs]
    collapsing = [r for r in results if r.run.collapse]
    healthy = [r for r in results if not r.run.collapse]
    caught = [r for r in collapsing if r.lead is not None and r.lead > 0]
    false_alarms = [r for r in healthy if r.first_alarm is not None]
    leads = [r.lead for r in caught]
    return {
        "results": results,
        "collapsing_runs": len(collapsing),
        "healthy_runs": len(healthy),
        "caught_in_time": len(caught),
        "recall": len(caught) / len(collapsing) if collapsing else None,
        "precision": len(caught) / (len(caught) + len(false_alarms)) if caught or false_alarms else None,
        "healthy_with_warning": len(false_alarms),
        "healthy_with_collapse_event": sum(1 for r in healthy if r.collapse_events),
        "collapse_event_recall": (sum(1 for r in collapsing if r.collapse_events) / len(collapsing)
                                  if collapsing else None),
        "median_lead": statistics.median(leads) if leads else None,
        "min_lead": min(leads) if leads else None,
    }
