"""The detector on other trainers' logs: simulated runs in TRL's, veRL's and RAGEN's key names and habits.

    .venv/bin/python bench/other_trainers.py [--seeds N] [--write DIR]

Seeded, not tuned on. Each run simulates every optimizer step (P groups x G rollouts that succeed with a
per-prompt probability around the run's success curve) and logs it as the trainer does:
- TRL GRPOTrainer: `reward` (mean over the batch, on the reward functions' scale), `reward_std` (the batch's
  std), `frac_reward_zero_std`, `rewards/<func>/mean`, `completions/mean_length`, `completions/clipped_ratio`,
  `entropy`, `grad_norm`, `kl`, `clip_ratio/region_mean`, `learning_rate`, `epoch`: every `logging_steps`
  optimizer steps (TRL averages the steps between), at steps k, 2k, ... (1 as well with
  logging_first_step), with W&B's `train/` prefix or without it (MLflow);
- veRL: `critic/score/mean`, `critic/rewards/mean`, `actor/entropy`, `actor/grad_norm`, `actor/pg_clipfrac`,
  `actor/ppo_kl`, `response_length/mean` every step from 1, `val-core/<source>/reward/mean@1` every 10;
- RAGEN: veRL's keys plus `train/<Env>/success`, `val-env/<Env>/success` every 10, `rollout/in_group_std`,
  `rollout/in_group_reward_std` and RAGEN-2's `collapse_first_turn_sample/*` every 5 steps.
Shapes: healthy learners (fast, slow), a noisy plateau, a run that never learns (0.02-0.1), an Echo Trap
collapse (groups agree, entropy and reasoning shrink, then success falls) and a blow-up (the gradient norm
explodes, then success crashes). Rewards on 0..1, -1..1, 0..10, and format + answer (0..2).
A collapse is caught when a warning or collapse event comes before the step where the true success
curve falls below half its peak; lead = that step minus the first alarm's. Healthy and never-learning
runs must get no alarm (warning or collapse) at all.
"""

import argparse
import json
import math
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from diagnostics import Detector  # noqa: E402

ALARMS = ("warning", "collapse")


def sigmoid(t, centre, width):
    return 1 / (1 + math.exp(-(t - centre) / width))


@dataclass(frozen=True)
class Shape:
    name: str
    steps: int
    start: float
    peak: float
    rise_at: float = 0.0  # centre of the rise (optimizer steps)
    rise_width: float = 1.0
    fall_at: float | None = None  # centre of the fall: a collapse
    fall_width: float = 4.0
    floor: float = 0.05
    echo: bool = False  # groups agree, entropy and reasoning shrink before the fall
    blowup: bool = False  # the gradient norm explodes before the fall

    def success(self, t):
        p = self.start + (self.peak - self.start) * sigmoid(t, self.rise_at, self.rise_width)
        if self.fall_at is not None:
            p = p - (p - self.floor) * sigmoid(t, self.fall_at, self.fall_width)
        return min(max(p, 0.0), 1.0)

    def agreement(self, t):
        """The share of groups that echo one template (every reply one outcome)."""
        if not self.echo or self.fall_at is None:
            return 0.0
        return 0.9 * sigmoid(t, self.fall_at - 5 * self.fall_width - 10, self.fall_width * 2)

    @property
    def collapses(self):
        return self.fall_at is not None

    def half_step(self):
        if not self.collapses:
            return None
        best = 0.0
        for t in range(1, self.steps + 1):
            best = max(best, self.success(t))
            if self.success(t) < best / 2 and t > self.rise_at:
                return t
        return None


def shapes(steps):
    s = steps
    return [
        Shape("healthy-fast", s, 0.1, 0.8, rise_at=s * 0.15, rise_width=s * 0.04),
        Shape("healthy-slow", s, 0.05, 0.55, rise_at=s * 0.55, rise_width=s * 0.15),
        Shape("noisy-plateau", s, 0.35, 0.45, rise_at=s * 0.1, rise_width=s * 0.05),
        Shape("never-0.02", s, 0.02, 0.02),
        Shape("never-0.1", s, 0.1, 0.1),
        Shape("echo-trap", s, 0.1, 0.75, rise_at=s * 0.15, rise_width=s * 0.04, fall_at=s * 0.7, echo=True),
        Shape(
            "blowup",
            s,
            0.1,
            0.75,
            rise_at=s * 0.15,
            rise_width=s * 0.04,
            fall_at=s * 0.6,
            fall_width=1.5,
            blowup=True,
        ),
    ]


# Reward scales: one rollout's reward from its success (and its format, for format + answer).
SCALES = {
    "0..1": lambda ok, fmt: float(ok),
    "-1..1": lambda ok, fmt: 2.0 * ok - 1.0,
    "0..10": lambda ok, fmt: 10.0 * ok,
    "format+answer": lambda ok, fmt: float(fmt) + float(ok),
}


def simulate_step(shape, t, groups, group_size, rng):
    """One optimizer step's rollouts: the raw statistics every trainer logs some of."""
    p = shape.success(t)
    agree = shape.agreement(t)
    fmt_rate = 0.3 + 0.68 * sigmoid(t, shape.steps * 0.05, shape.steps * 0.02)
    blown = shape.blowup and shape.fall_at is not None and t >= shape.fall_at - 8
    outcomes, formats = [], []
    for _ in range(groups):
        pg = min(max(p + rng.gauss(0, 0.15), 0.0), 1.0)
        if rng.random() < agree:
            ok = rng.random() < pg
            oks = [ok] * group_size
        else:
            oks = [rng.random() < pg for _ in range(group_size)]
        fmts = [ok or rng.random() < fmt_rate for ok in oks]
        outcomes.append(oks)
        formats.append(fmts)
    base_entropy = 0.35 + 0.5 * math.exp(-t / (shape.steps * 0.3))
    entropy = base_entropy * (1 - 0.85 * agree) * rng.lognormvariate(0, 0.03)
    if blown:
        entropy *= 1 + 2 * sigmoid(t, shape.fall_at, 2)
    grad = rng.lognormvariate(math.log(0.25), 0.25)
    if blown:
        grad *= 40 * rng.lognormvariate(0, 0.3)
    length = 300 * (1 - 0.8 * agree) * rng.lognormvariate(0, 0.05)
    return {"outcomes": outcomes, "formats": formats, "entropy": entropy, "grad": grad, "length": length}


def rewards(raw, scale):
    f = SCALES[scale]
    return [[f(ok, fm) for ok, fm in zip(oks, fms)] for oks, fms in zip(raw["outcomes"], raw["formats"])]


def std(xs):
    return statistics.stdev(xs) if len(xs) > 1 else 0.0


def trl_row(raws, scale, prefix, t, lr):
    """TRL's log: the mean over the steps since the last log of each step's metrics."""
    per = []
    for raw in raws:
        rs = rewards(raw, scale)
        flat = [r for g in rs for r in g]
        per.append(
            {
                "reward": statistics.fmean(flat),
                "reward_std": std(flat),
                "frac_reward_zero_std": statistics.fmean(float(std(g) < 1e-6) for g in rs),
                "rewards/accuracy_reward/mean": statistics.fmean(
                    float(o) for g in raw["outcomes"] for o in g
                ),
                "completions/mean_length": raw["length"],
                "completions/clipped_ratio": 0.01,
                "entropy": raw["entropy"],
                "grad_norm": raw["grad"],
                "kl": 0.001 * t,
                "clip_ratio/region_mean": 0.0,
            }
        )
        if scale == "format+answer":
            per[-1]["rewards/format_reward/mean"] = statistics.fmean(
                float(f) for g in raw["formats"] for f in g
            )
    row = {key: statistics.fmean(p[key] for p in per) for key in per[0]}
    row.update(learning_rate=lr, epoch=t / 500)
    return {prefix + key: value for key, value in row.items()}


def verl_row(raw, scale, ragen, t, val, env="SimpleSokoban"):
    rs = rewards(raw, scale)
    flat = [r for g in rs for r in g]
    row = {
        "critic/score/mean": statistics.fmean(flat),
        "critic/score/max": max(flat),
        "critic/score/min": min(flat),
        "critic/rewards/mean": statistics.fmean(flat) - 0.001,
        "critic/advantages/mean": 0.0,
        "actor/entropy": raw["entropy"],
        "actor/grad_norm": raw["grad"],
        "actor/pg_clipfrac": 0.002,
        "actor/ppo_kl": 0.0001,
        "actor/pg_loss": -0.01,
        "response_length/mean": raw["length"],
        "timing_s/step": 30.0,
        "perf/throughput": 900.0,
    }
    if ragen:
        success = statistics.fmean(float(o) for g in raw["outcomes"] for o in g)
        in_group = statistics.fmean(std(g) for g in rs)
        row.update(
            {
                f"train/{env}/success": success,
                f"train/{env}/num_actions": 3.0,
                "rollout/in_group_std": in_group,
                "rollout/in_group_reward_std": in_group,
                "rollout/filter_kept_ratio": 1.0,
            }
        )
        if val is not None:
            row[f"val-env/{env}/success"] = val
    elif val is not None:
        row["val-core/openai/gsm8k/reward/mean@1"] = val
    return row


def run_rows(shape, trainer, scale, seed, logging_steps=10, prefix="train/", first_step=False):
    """(step, metrics) as the trainer logs them."""
    rng = random.Random(f"{shape.name}/{trainer}/{scale}/{seed}")
    rows = []
    if trainer == "trl":
        groups, size = 8, 8
        window = []
        for t in range(1, shape.steps + 1):
            window.append(simulate_step(shape, t, groups, size, rng))
            if t % logging_steps == 0 or (first_step and t == 1):
                rows.append((t, trl_row(window, scale, prefix, t, 1e-6)))
                window = []
    else:
        ragen = trainer == "ragen"
        groups, size = (8, 16) if ragen else (32, 8)
        for t in range(1, shape.steps + 1):
            raw = simulate_step(shape, t, groups, size, rng)
            val = None
            if t % 10 == 0:
                p = shape.success(t)
                hits = sum(rng.random() < p for _ in range(128)) / 128
                val = hits if ragen else SCALES[scale](hits, True) if scale != "format+answer" else 1 + hits
            rows.append((t, verl_row(raw, scale, ragen, t, val)))
    return rows


def judge(rows):
    det = Detector()
    events = []
    for step, metrics in rows:
        events.extend(det.update(step, metrics))
    return events


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--write", help="write each run as JSON lines into this folder")
    args = parser.parse_args()
    configs = [
        ("trl", "train/", 10, 500),
        ("trl", "", 1, 200),
        ("verl", "", 1, 200),
        ("ragen", "", 1, 200),
    ]
    print(
        "| trainer | logging | scale | shape | runs | alarmed | caught | leads (steps) | collapse events "
        "| first alarms |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    totals = {}  # (trainer and logging, shape) -> [runs, alarmed, caught, leads, collapse events], all scales
    for trainer, prefix, k, steps in configs:
        for scale in SCALES:
            if trainer == "ragen" and scale not in ("0..1", "format+answer"):
                continue
            for shape in shapes(steps):
                alarmed, caught, leads, collapses, firsts = 0, 0, [], 0, []
                for seed in range(args.seeds):
                    rows = run_rows(shape, trainer, scale, seed, k, prefix)
                    events = judge(rows)
                    if args.write:
                        path = Path(args.write) / f"{trainer}-{k}-{scale}-{shape.name}-s{seed}.jsonl"
                        path.parent.mkdir(parents=True, exist_ok=True)
                        path.write_text("".join(json.dumps({"step": s, **m}) + "\n" for s, m in rows))
                    alarms = [e for e in events if e["level"] in ALARMS]
                    collapses += any(e["level"] == "collapse" for e in events)
                    if alarms:
                        alarmed += 1
                        firsts.append(f"{alarms[0]['step']}:{alarms[0]['rule']}")
                        half = shape.half_step()
                        if half is not None and alarms[0]["step"] < half:
                            caught += 1
                            leads.append(half - alarms[0]["step"])
                name = f"{trainer}{' (' + prefix + ')' if prefix else ''} | every {k}"
                print(
                    f"| {name} | {scale} | {shape.name} "
                    f"| {args.seeds} | {alarmed} | {caught if shape.collapses else '-'} "
                    f"| {sorted(leads) if leads else '-'} | {collapses} | {' '.join(firsts[:5])} |"
                )
                total = totals.setdefault((name, shape), [0, 0, 0, [], 0])
                for index, count in enumerate((args.seeds, alarmed, caught)):
                    total[index] += count
                total[3] += leads
                total[4] += collapses
    print()
    print(
        "| trainer | logging | shape | runs (all scales) | alarmed | caught | median lead | collapse events |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for (name, shape), (runs, alarmed, caught, leads, collapses) in totals.items():
        print(
            f"| {name} | {shape.name} | {runs} | {alarmed} | {caught if shape.collapses else '-'} "
            f"| {statistics.median(leads) if leads else '-'} | {collapses} |"
        )


if __name__ == "__main__":
    main()
