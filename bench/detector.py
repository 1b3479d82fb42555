"""Detector benchmark: quality on the labelled set, and per-step cost.

    .venv/bin/python bench/detector.py [--overrides JSON]

Quality over tests/data/detector/, with the default parameters unless overridden: per run, then per rule
and for all rules together, on the synthetic and on the real runs separately: collapses caught (an alarm,
i.e. a warning or collapse event, strictly before the step where success falls below half its peak),
median and minimum lead (steps from that alarm to the half-peak step), collapsing runs that got a
collapse event at any step, false collapses (collapse events on healthy runs) and healthy runs with any
alarm. Info markers (grad_spike, policy_shift) are not alarms. Where some collapses halve before step 10
(calibration.JUDGED_FROM: before any rule can judge), two more rows count those and the later ones apart.
Simulated (seeded, not tuned on): how often a plateau that learned and holds warns while its groups agree
(reward std down, success on 16 or 32 episodes a step, or half of it all-or-nothing per prompt), and how
often a learned 0.7 that falls to 0.05 over 15 steps, its reward std down 30 steps before, is warned of
before success halves, and how often a run that never learned and holds one level near or above the
0.2 floor for 150 steps "loses its start" at some step: runs the labelled set has too few of to judge
the success guard on.
Cost: microseconds per update() over a 10k-step and a 100k-step run of all metrics; the ratio of the
two per-step costs is ~1 when the update is O(1) in the run's length.
"""

import argparse
import json
import random
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnostics import Detector  # noqa: E402
from diagnostics.calibration import ALARMS, HELD, JUDGED_FROM, load_labelled_set, score, summarize  # noqa: E402
from diagnostics.rules import RULES, SuccessTrend  # noqa: E402


def quality(overrides):
    s = score(load_labelled_set(ROOT / "tests/data/detector"), overrides)
    results = s["results"]
    print(
        "| run | label | first alarm | success at it / best before (5-step average) | half-peak step "
        "| lead | collapse event |"
    )
    print("|---|---|---|---|---|---|---|")
    held = {"synthetic": [], "real": []}
    for r in results:
        collapse_at = r.collapse_events[0]["step"] if r.collapse_events else "-"
        at = r.run.success_at(r.first_alarm) if r.first_alarm is not None else None
        if r.warned_while_success_held:
            held[r.source].append(r.run.name)
        print(
            f"| {r.run.name} | {'collapse' if r.run.collapse else 'healthy'} | {r.first_alarm or '-'} "
            f"| {'-' if at is None else f'{at[0]:.2f} / {at[1]:.2f}'} "
            f"| {r.run.half_peak_step or '-'} | {'-' if r.lead is None else r.lead} | {collapse_at} |"
        )
    print()
    for source, names in held.items():
        print(
            f"{source}: healthy runs whose first alarm came while success held (its 5-step average at "
            f"least {HELD:.0%} of its best before): {len(names)} {names}"
        )
    print()
    print(
        "| runs | rule | collapses caught (alarm before half-peak) | median / min lead (steps) "
        "| collapse event, any step | false collapses | healthy runs with a warning |"
    )
    print("|---|---|---|---|---|---|---|")
    for source in ("synthetic", "real"):
        subset = [r for r in results if r.source == source]
        for rule in (*RULES, None):
            summary_row(source, summarize(subset, rule), rule or "**all rules**")
        early = [r for r in subset if r.broke_at_once]
        if early:  # the collapses a lead can be asked of, apart from those that broke at once
            later = [r for r in subset if not r.broke_at_once]
            summary_row(
                f"{source}, collapses halving at step {JUDGED_FROM} or later", summarize(later), "all rules"
            )
            summary_row(
                f"{source}, collapses halving before step {JUDGED_FROM}", summarize(early), "all rules"
            )


def summary_row(runs: str, m: dict, rule: str) -> None:
    lead = "-" if m["median_lead"] is None else f"{m['median_lead']:g} / {m['min_lead']}"
    print(
        f"| {runs} ({m['collapsing_runs']} collapse, {m['healthy_runs']} healthy) "
        f"| {rule} | {m['caught_in_time']}/{m['collapsing_runs']} | {lead} "
        f"| {m['collapses_with_collapse_event']}/{m['collapsing_runs']} "
        f"| {m['healthy_with_collapse_event']} | {m['healthy_with_warning']}/{m['healthy_runs']} |"
    )


SUCCESS, STD = "train/success", "train/reward_std_in_group"


def episodes(p, n, rng):
    return sum(rng.random() < p for _ in range(n)) / n


def plateau(kind, seed):
    """Success 0.1 for 10 steps, then a plateau; reward std falls at step 30 (learning, not collapse)."""
    rng, rows = random.Random(seed), []
    for step in range(150):
        p = 0.1 if step < 10 else 0.6
        x = {
            "16 episodes": episodes(p, 16, rng),
            "32 episodes": episodes(p, 32, rng),
            "half all-or-nothing": episodes(p, 4, rng) / 2 + episodes(p, 16, rng) / 2,
        }[kind]
        rows.append({SUCCESS: x, STD: 0.45 if step < 30 else 0.1})
    return rows


def falling(seed):
    """Learns 0.1 -> 0.7 by step 30, reward std falls at 50, success falls 0.7 -> 0.05 over steps 80-95."""
    rng, rows = random.Random(seed), []
    p_of = [
        0.1 + 0.6 * min(t / 30, 1) if t < 80 else max(0.7 - 0.65 * (t - 80) / 15, 0.05) for t in range(130)
    ]
    for step, p in enumerate(p_of):
        rows.append({SUCCESS: episodes(p, 32, rng), STD: 0.45 if step < 50 else 0.08})
    return rows, next(t for t in range(80, 130) if p_of[t] < 0.35)


def simulated(overrides):
    def alarms(rows):
        return [
            e["step"] for e in Detector.replay(list(enumerate(rows)), overrides)[1] if e["level"] in ALARMS
        ]

    print("| simulated runs | result |")
    print("|---|---|")
    for kind in ("16 episodes", "32 episodes", "half all-or-nothing"):
        warned = sum(bool(alarms(plateau(kind, seed))) for seed in range(40))
        print(f"| 0.6 plateau, {kind} a step (healthy) | {warned}/40 warned |")
    leads = []
    for seed in range(20):
        rows, half = falling(seed)
        first = alarms(rows)
        if first and first[0] < half:
            leads.append(half - first[0])
    lead = f", lead median {sorted(leads)[len(leads) // 2]} / min {min(leads)}" if leads else ""
    print(f"| 0.7 falling to 0.05 over 15 steps (collapse) | {len(leads)}/20 caught{lead} |")
    for p, n in HELD_LEVELS:
        lost = sum(lost_its_start(p, n, seed) for seed in range(100))
        print(
            f"| {p} on {n} episodes for 150 steps, never learning (healthy) | {lost}/100 lost their start |"
        )


# Levels a run that never learned holds, near and above SuccessTrend.MIN_START: success rate, episodes a step.
HELD_LEVELS = ((0.21, 64), (0.3, 16), (0.45, 32))


def lost_its_start(p, n, seed):
    """Whether a run holding success p (n episodes a step) for 150 steps "loses its start" at some step."""
    rng, trend = random.Random(seed), SuccessTrend()
    for _ in range(150):
        trend.update({SUCCESS: episodes(p, n, rng)})
        if trend.lost_start(3):
            return True
    return False


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
        "actor/approx_kl": 0.001 * rng.standard_normal(steps),
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
    overrides = json.loads(args.overrides)
    quality(overrides)
    print()
    simulated(overrides)
    print()
    cost()


if __name__ == "__main__":
    main()
