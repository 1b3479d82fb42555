"""Detector benchmark: quality on the labelled set, and per-step cost.

    .venv/bin/python bench/detector.py [--overrides JSON]

Quality over tests/data/detector/, with the default parameters unless overridden: per run, then per rule
and for all rules together, on the synthetic and on the real runs separately: collapses caught (an alarm,
i.e. a warning or collapse event, strictly before the step where success falls below half its peak),
median and minimum lead (steps from that alarm to the half-peak step), false collapses (collapse events
on healthy runs) and healthy runs with any alarm. Info markers (grad_spike) are not alarms.
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
from diagnostics.calibration import load_labelled_set, score, summarize  # noqa: E402
from diagnostics.rules import RULES  # noqa: E402


def quality(overrides):
    s = score(load_labelled_set(ROOT / "tests/data/detector"), overrides)
    results = s["results"]
    print("| run | label | first alarm | half-peak step | lead | collapse event |")
    print("|---|---|---|---|---|---|")
    for r in results:
        collapse_at = r.collapse_events[0]["step"] if r.collapse_events else "-"
        print(
            f"| {r.run.name} | {'collapse' if r.run.collapse else 'healthy'} | {r.first_alarm or '-'} "
            f"| {r.run.half_peak_step or '-'} | {'-' if r.lead is None else r.lead} | {collapse_at} |"
        )
    print()
    print(
        "| runs | rule | collapses caught (alarm before half-peak) | median / min lead (steps) "
        "| false collapses | healthy runs with a warning |"
    )
    print("|---|---|---|---|---|---|")
    for source in ("synthetic", "real"):
        subset = [r for r in results if r.source == source]
        for rule in (*RULES, None):
            m = summarize(subset, rule)
            lead = "-" if m["median_lead"] is None else f"{m['median_lead']:g} / {m['min_lead']}"
            print(
                f"| {source} ({m['collapsing_runs']} collapse, {m['healthy_runs']} healthy) "
                f"| {rule or '**all rules**'} | {m['caught_in_time']}/{m['collapsing_runs']} | {lead} "
                f"| {m['healthy_with_collapse_event']} | {m['healthy_with_warning']}/{m['healthy_runs']} |"
            )


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
