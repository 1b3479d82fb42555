"""Detector benchmark: quality on the labelled set, and per-step cost.

    .venv/bin/python bench/detector.py [--overrides JSON]

Quality: precision, recall and lead time (steps from the first alarm to the step where success falls
below half its peak) over tests/data/detector/, with the default parameters unless overridden.
Cost: microseconds per update() over a 10k-step and a 100k-step run of all metrics; the ratio of the
two per-step costs is ~1 when the update is O(1) in the run's length.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnostics import Detector  # noqa: E402
from diagnostics.calibration import load_labelled_set, score  # noqa: E402


def quality(overrides):
    s = score(load_labelled_set(ROOT / "tests/data/detector"), overrides)
    print("| run | label | first alarm | half-peak step | lead | collapse event |")
    print("|---|---|---|---|---|---|")
    for r in s["results"]:
        collapse_at = r.collapse_events[0]["step"] if r.collapse_events else "-"
        print(f"| {r.run.name} | {'collapse' if r.run.collapse else 'healthy'} | {r.first_alarm or '-'} "
              f"| {r.run.half_peak_step or '-'} | {'-' if r.lead is None else r.lead} | {collapse_at} |")
    print()
    print("| measure | value |")
    print("|---|---|")
    print(f"| collapsing / healthy runs | {s['collapsing_runs']} / {s['healthy_runs']} |")
    caught = f"{s['caught_in_time']}/{s['collapsing_runs']}"
    print(f"| recall (alarm before half-peak) | {s['recall']:.2f} ({caught}) |")
    print(f"| precision (runs with an alarm) | {s['precision']:.2f} |")
    print(f"| healthy runs with a warning | {s['healthy_with_warning']} |")
    print(f"| healthy runs with a collapse event | {s['healthy_with_collapse_event']} |")
    print(f"| collapsing runs with a collapse event | {s['collapse_event_recall']:.2f} |")
    print(f"| median / min lead (steps) | {s['median_lead']} / {s['min_lead']} |")


def run_of(steps, seed=0):
    """A long run logging every metric the rules read, with noise and a few spikes and NaNs."""
    rng = np.random.default_rng(seed)
    t = np.arange(steps)
    columns = {
        "train/success": np.clip(0.3 + 0.05 * rng.standard_normal(steps), 0, 1),
        "train/reward_std_in_group": np.abs(0.4 + 0.05 * rng.standard_normal(steps)),
        "train/frac_zero_std_groups": rng.uniform(0, 0.3, steps),
        "actor/entropy": 1.0 + 0.01 * rng.standard_normal(steps),
        "actor/grad_norm": np.where(t % 997 == 0, np.nan, np.exp(rng.normal(0, 0.3, steps))),
        "response/think_tokens_mean": 120 + 5 * rng.standard_normal(steps),
    }
    return [{k: float(v[i]) for k, v in columns.items()} for i in range(steps)]


def per_step_us(rows):
    detector = Detector()
    start = time.perf_counter()
    for step, metrics in enumerate(rows):
        detector.update(step, metrics)
    return (time.perf_counter() - start) / len(rows) * 1e6


def cost():
    short, long = run_of(10_000), run_of(100_000)
    per_step_us(short)  # warm up
    short_us, long_us = per_step_us(short), per_step_us(long)
    print("| steps | µs/step |")
    print("|---|---|")
    print(f"| 10,000 | {short_us:.1f} |")
    print(f"| 100,000 | {long_us:.1f} |")
    print(f"| ratio 100k/10k | {long_us / short_us:.2f} |")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--overrides", default="{}", help="rule parameters as JSON")
    args = parser.parse_args()
    quality(json.loads(args.overrides))
    print()
    cost()


if __name__ == "__main__":
    main()
