"""Copy real runs of our trainer into the detector's labelled set (tests/data/detector/real/).

    .venv/bin/python bench/real_runs.py NAME=RUN_DIR [NAME=RUN_DIR ...] [--note NAME=TEXT ...]

Each RUN_DIR/metrics.jsonl is trimmed to the keys the detector reads (diagnostics.aliases.KEYS and the
template-collapse keys) and
written as real/NAME.jsonl; its label goes into real/labels.json (entries for other files are kept).
The label comes from the success curve, smoothed with a centred 5-step moving average because one
step's train/success is a noisy estimate (32-128 episodes):
  collapse  = after a real peak (smoothed peak at least 0.1 above the smoothed start) the smoothed
              success falls below half of the peak and stays below it to the end of the run (at least
              3 steps); a run without a real peak that starts at 0.2 or more is judged the same way
              against its start (it can lose what it could do before training: a too-high learning
              rate breaks a working policy in a few steps);
  half_peak_step = the first step after the peak (or start) where the smoothed success is below half
              of it.
The printed curve is there to check each label by eye before committing. `--collapse NAME=STEP`
overrides the rule for a run cut off right after its fall (the rule needs 3 steps down); the
override and its reason (--note) are recorded in the label.
"""

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnostics.aliases import KEYS  # noqa: E402
from diagnostics.calibration import centred_average  # noqa: E402
from diagnostics.rules import SuccessTrend  # noqa: E402

REAL = ROOT / "tests/data/detector/real"
# The detector's keys, and the template-collapse measurements its template_collapse rule reads.
KEEP = set(KEYS) | {"collapse/mi_estimate", "collapse/retrieval_above_chance"}
# A lower start is noise around nothing (a never-learning run has nothing to lose): the detector's floor.
MIN_START = SuccessTrend.MIN_START


def label(rows):
    steps = [r["step"] for r in rows]
    s = centred_average([r["train/success"] for r in rows])
    top = max(range(len(s)), key=s.__getitem__)
    start = s[0]
    label = {"collapse": False, "peak": round(s[top], 3), "peak_step": steps[top], "start": round(start, 3)}
    if s[top] - start >= 0.1:
        level, since = s[top], top
    elif start >= MIN_START:
        level, since = start, 0
    else:
        return label
    below = [i for i in range(since, len(s)) if s[i] < level / 2]
    if below and all(s[i] < level / 2 for i in range(below[0], len(s))) and len(s) - below[0] >= 3:
        label.update(collapse=True, half_peak_step=steps[below[0]])
    return label


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("runs", nargs="+", metavar="NAME=RUN_DIR")
    p.add_argument("--note", action="append", default=[], metavar="NAME=TEXT")
    p.add_argument(
        "--collapse",
        action="append",
        default=[],
        metavar="NAME=STEP",
        help="label NAME a collapse with half_peak_step STEP (by eye)",
    )
    args = p.parse_args()
    notes = dict(n.split("=", 1) for n in args.note)
    manual = {k: int(v) for k, v in (c.split("=", 1) for c in args.collapse)}
    REAL.mkdir(parents=True, exist_ok=True)
    path = REAL / "labels.json"
    labels = json.loads(path.read_text()) if path.exists() else {"runs": {}}
    labels["about"] = (
        "Runs of our trainer (tiny model, CPU), trimmed to the detector's keys. Labelled from "
        "the 5-step moving average of train/success by bench/real_runs.py: collapse = after a "
        "peak at least 0.1 above the start (or, without one, from a start of at least 0.2), "
        "below half the peak (or start) to the end of the run."
    )
    for item in args.runs:
        name, run_dir = item.split("=", 1)
        rows = [json.loads(line) for line in open(Path(run_dir) / "metrics.jsonl")]
        rows = sorted((r for r in rows if "step" in r), key=lambda r: r["step"])
        trimmed = [{"step": r["step"], **{k: v for k, v in r.items() if k in KEEP}} for r in rows]
        (REAL / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in trimmed))
        lab = label(rows)
        config = Path(run_dir) / "config.yaml"
        entry = {
            "collapse": lab["collapse"],
            "source": "real",
            "case": notes.get(name, ""),
            "note": f"smoothed success {lab['start']} at start, peak {lab['peak']} at step {lab['peak_step']}, "
            f"{len(rows)} steps",
        }
        if lab["collapse"]:
            entry["half_peak_step"] = lab["half_peak_step"]
        if name in manual:
            entry.update(collapse=True, half_peak_step=manual[name], labelled="by eye (--collapse)")
        labels["runs"][f"{name}.jsonl"] = entry
        curve = " ".join(f"{x:.2f}" for x in centred_average([r["train/success"] for r in rows]))
        print(f"{name}: {entry}\n  smoothed success: {curve}\n  config: {config.exists()}")
    path.write_text(json.dumps(labels, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
