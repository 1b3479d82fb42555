"""Learning curves of the tiny model on CPU: StarPO vs StarPO-S over seeds, Bandit and FrozenLake 4x4.

    .venv/bin/python bench/learning.py [--minutes-per-run bandit=10,frozenlake=20] [--only bandit]
        [--seeds 0,1,2] [--threads 1] [--jobs 2] [--set model.warm_start=DIR --variant warm] [--report-only]

Each run is a fresh subprocess (`--one ENV PRESET SEED`): it validates the untrained model on the fixed
validation seeds, trains until the CPU-time cap (the loop's should_stop), validates the final policy
on the same seeds, and writes bench/out/learning/<env>-<preset>[-<variant>]-s<seed>/{metrics.jsonl,
summary.json} (and the final checkpoint, a few MB).
Then two tables (markdown) are printed, one row per run and one per setting (mean and standard error
over seeds, median, worst), and the curves are drawn to docs/img/learning_<env>.png.
"""

import argparse
import concurrent.futures
import json
import math
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "bench/out/learning"
IMG = ROOT / "docs/img"
ENVS = {"bandit": {}, "frozenlake": {"size": 4}}
# Groups of 8 instead of the paper's 16 on FrozenLake: a 5-turn step then takes half as long, and twice the
# updates in 20 minutes learned more than twice the samples per update (docs/BENCHMARKS.md, "Learning").
ENV_OVERRIDES = {"bandit": [], "frozenlake": ["rollout.group_size=8"]}
PRESETS = ("starpo", "starpo-s")
DEFAULT_MINUTES = {"bandit": 10.0, "frozenlake": 20.0}


def run_dir(env: str, preset: str, seed: int, variant: str) -> Path:
    return OUT / f"{env}-{preset}{'-' + variant if variant else ''}-s{seed}"


def run_one(env, preset, seed, minutes, threads, steps, overrides, val_seeds, variant):
    import torch

    torch.set_num_threads(threads)
    from trainer.config import TrainConfig
    from trainer.loop import Trainer, train
    from trainer.sink import JsonlSink

    out = run_dir(env, preset, seed, variant)
    if out.exists():
        for f in out.rglob("*"):
            if f.is_file():
                f.unlink()
    overrides = ENV_OVERRIDES[env] + overrides
    params = [f"env.params.{k}={v}" for k, v in ENVS[env].items()] + overrides
    cfg = TrainConfig.preset(
        preset,
        *params,
        env={"name": env},
        seed=seed,
        schedule={"steps": steps, "checkpoint_every": 0, "keep_checkpoints": 1},
    )
    # Start and end are validated on more seeds than the periodic validation during training, which costs
    # training time: 256 episodes put the standard error of a success rate of 0.2 at 0.025.
    val_cfg = TrainConfig.preset(
        preset, *params, f"rollout.val_seeds={val_seeds}", env={"name": env}, seed=seed
    )
    start = time.time()
    val_start = Trainer(val_cfg).validate()
    t_val = time.time() - start
    # The cap is the run's own CPU time (one thread: one core's worth), not the wall clock, so that other
    # jobs on a shared machine cost a run wall time but not training steps.
    cpu_start, wall_start = time.process_time(), time.time()
    sink = JsonlSink(str(out), cfg.to_yaml(), stream=open(os.devnull, "w"))
    result = train(cfg, sink, str(out), should_stop=lambda: time.process_time() - cpu_start > minutes * 60)
    train_cpu_s, train_wall_s = time.process_time() - cpu_start, time.time() - wall_start
    from trainer import checkpoint

    t0 = time.time()
    val_end = Trainer(val_cfg, init_dir=checkpoint.find(str(out))).validate()
    rows = [json.loads(line) for line in open(out / "metrics.jsonl")]
    rows = [r for r in rows if "step" in r]
    summary = {
        "env": env,
        "preset": preset,
        "variant": variant,
        "seed": seed,
        "result": result,
        "steps": len(rows),
        "val_start": val_start,
        "val_end": val_end,
        "train_cpu_s": train_cpu_s,
        "train_wall_s": train_wall_s,
        "val_wall_s": t_val + time.time() - t0,
        "val_seeds": val_seeds,
        "overrides": overrides,
    }
    (out / "summary.json").write_text(json.dumps(summary))
    print(json.dumps(summary))


def load(env):
    runs = []
    for d in sorted(OUT.glob(f"{env}-*")):
        if not (d / "summary.json").exists():
            continue
        summary = json.loads((d / "summary.json").read_text())
        rows = [json.loads(line) for line in open(d / "metrics.jsonl")]
        rows = [r for r in rows if "step" in r]
        runs.append((summary, rows))
    return runs


def first_reach(rows, key, threshold):
    """Step and cumulative step time (s) at which key first reaches threshold; (None, None) when never."""
    elapsed = 0.0
    for r in rows:
        elapsed += r.get("time/step_s", 0.0)
        if r.get(key) is not None and r[key] >= threshold:
            return r["step"], elapsed
    return None, None


def reference_policies(env_name: str, seeds: int, budget: int = 10) -> dict[str, float]:
    """Success on the validation seeds of policies that need no model, for scale: uniformly random actions
    and the optimum (exact), both with the episode's action budget; on FrozenLake also heading for the goal
    (a random action among those that shorten the distance to it, blind to holes and slipping) and the
    SFT teacher's turn plans (`oracle_plan`, 5 actions a turn)."""
    import random

    from envs.frozenlake import ACTIONS, MOVES
    from envs.registry import make, validate_params
    from trainer.config import RolloutConfig
    from trainer.loop import VAL_SEED_BASE

    env = make(env_name, **validate_params(env_name, ENVS[env_name]))
    rng = random.Random(0)

    def toward_goal():
        (row, col), (goal_row, goal_col) = (
            env.position,
            next((r, c) for r, line in enumerate(env.rows) for c, tile in enumerate(line) if tile == "G"),
        )
        return rng.choice(
            [
                action
                for action, (d_row, d_col) in zip(ACTIONS, MOVES)
                if d_row * (goal_row - row) > 0 or d_col * (goal_col - col) > 0
            ]
        )

    def mean_over_seeds(score) -> float:
        total = 0.0
        for seed in range(VAL_SEED_BASE, VAL_SEED_BASE + seeds):
            env.reset(seed)
            total += score()
        return total / seeds

    def success(policy) -> bool:
        for _ in range(budget):
            _, _, done, info = env.step(policy())
            if done:
                break
        return info["success"]

    def planned() -> bool:
        """Each turn's actions chosen from the turn's state (the SFT teacher on slippery ice)."""
        per_turn, used = RolloutConfig().max_actions_per_turn, 0
        while used < budget:
            length = min(per_turn, budget - used)
            plan = env.oracle_plan(length, budget - used - length)
            for action in plan or [env.oracle_action()]:  # None: deterministic, the oracle step by step
                _, _, done, info = env.step(action)
                used += 1
                if done:
                    return info["success"]
        return False

    result = {"random": mean_over_seeds(lambda: success(lambda: rng.choice(env.actions)))}
    if env_name == "frozenlake":
        result["toward the goal"] = mean_over_seeds(lambda: success(toward_goal))
        result["oracle turn plans"] = mean_over_seeds(planned)
    result["optimal"] = mean_over_seeds(lambda: env.optimal_success(budget))
    return result


def setting(summary: dict) -> str:
    """A run's setting: the preset, and the variant when one was given (e.g. a warm start)."""
    return summary["preset"] + (f" ({summary['variant']})" if summary.get("variant") else "")


def success_se(p: float, n: int) -> float:
    """Standard error of a success rate p measured on n episodes."""
    return math.sqrt(max(p * (1 - p), 0.0) / n)


def gain_se(summary: dict) -> float:
    """Standard error of val end - val start, the two measured on val_seeds episodes each."""
    n = summary["val_seeds"]
    return math.hypot(success_se(summary["val_start"], n), success_se(summary["val_end"], n))


def train_time(summary: dict) -> str:
    cpu = summary.get("train_cpu_s")  # runs before the CPU-time cap recorded the wall time only
    wall = f"{summary['train_wall_s'] / 60:.1f} min"
    return f"{cpu / 60:.1f} / {wall}" if cpu is not None else f"- / {wall}"


def table(envs):
    print(
        "| env | setting | seed | train success step 0 | final (mean last 5) | best | val start | val end "
        "| gain / its SE | first step >= 0.9 (s of step time) | steps | train CPU / wall |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for env in envs:
        for s, rows in load(env):
            succ = [r["train/success"] for r in rows]
            last = succ[-5:]
            step90, t90 = first_reach(rows, "train/success", 0.9)
            reach = f"{step90} ({t90:.0f} s)" if step90 is not None else "never"
            gain = s["val_end"] - s["val_start"]
            print(
                f"| {env} | {setting(s)} | {s['seed']} | {succ[0]:.2f} | {sum(last) / len(last):.2f} "
                f"| {max(succ):.2f} | {s['val_start']:.3f} | {s['val_end']:.3f} | {gain:+.3f} / "
                f"{gain_se(s):.3f} | {reach} | {s['steps']} | {train_time(s)} |"
            )


def spread(envs):
    """Per setting, over its seeds: validation start and end as mean ± standard error over seeds, the
    median and worst end, and how many runs ended above their start by at least two standard errors."""
    print(
        "\n| env | setting | runs | val start | val end (mean ± SE over seeds) | median end | worst end "
        "| worst gain | runs with end > start + 2 SE |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for env in envs:
        by_setting: dict[str, list[dict]] = {}
        for s, _ in load(env):
            by_setting.setdefault(setting(s), []).append(s)
        for name, runs in by_setting.items():
            ends = [s["val_end"] for s in runs]
            starts = [s["val_start"] for s in runs]
            se = statistics.stdev(ends) / math.sqrt(len(ends)) if len(ends) > 1 else float("nan")
            above = sum(s["val_end"] - s["val_start"] >= 2 * gain_se(s) for s in runs)
            print(
                f"| {env} | {name} | {len(runs)} | {statistics.fmean(starts):.3f} "
                f"| {statistics.fmean(ends):.3f} ± {se:.3f} | {statistics.median(ends):.3f} "
                f"| {min(ends):.3f} | {min(e - b for e, b in zip(ends, starts)):+.3f} | {above} of {len(runs)} |"
            )


def plot(env):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs = load(env)
    if not runs:
        return
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.2), dpi=80)
    settings = sorted({setting(s) for s, _ in runs})

    def color(summary: dict) -> str:
        return f"C{settings.index(setting(summary))}"

    for s, rows in runs:
        t, elapsed = [], 0.0
        for r in rows:
            elapsed += r.get("time/step_s", 0.0)
            t.append(elapsed / 60)
        style = ("-", "--", ":")[s["seed"] % 3]
        label = f"{setting(s)} s{s['seed']}"
        axes[0].plot(t, [r["train/success"] for r in rows], style, color=color(s), label=label, lw=1)
        val = (
            [(0.0, s["val_start"])]
            + [(t[i], r["val/success"]) for i, r in enumerate(rows) if r.get("val/success") is not None]
            + [(t[-1], s["val_end"])]
        )
        axes[1].plot(*zip(*val), style, marker=".", color=color(s), label=label, lw=1)
    for ax, title in zip(axes, ("train/success", "val/success (fixed seeds)")):
        ax.set_title(f"{env}: {title}", fontsize=9)
        ax.set_xlabel("minutes of step time", fontsize=8)
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7)
    axes[1].legend(fontsize=7)
    fig.tight_layout()
    IMG.mkdir(parents=True, exist_ok=True)
    fig.savefig(IMG / f"learning_{env}.png")
    print(f"wrote docs/img/learning_{env}.png ({(IMG / f'learning_{env}.png').stat().st_size // 1024} KB)")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes-per-run", default="", help="e.g. bandit=5,frozenlake=7 or one number for all")
    p.add_argument("--only", choices=list(ENVS))
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--presets", default=",".join(PRESETS))
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--jobs", type=int, default=2, help="runs at once (one per core at --threads 1)")
    p.add_argument(
        "--max-steps", type=int, default=1000, help="step cap; the CPU-time cap usually ends a run"
    )
    p.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="SECTION.FIELD=VALUE",
        help="override the tiny profile, as in `python -m trainer train --set`",
    )
    p.add_argument("--val-seeds", type=int, default=256, help="episodes of the start and end validation")
    p.add_argument(
        "--variant",
        default="",
        help="a name for what --set changes (e.g. warm-sft): kept apart from the preset's plain runs",
    )
    p.add_argument("--report-only", action="store_true", help="only print the table and draw the plots")
    p.add_argument("--one", nargs=3, metavar=("ENV", "PRESET", "SEED"), help=argparse.SUPPRESS)
    p.add_argument("--minutes", type=float, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        env, preset, seed = args.one
        run_one(
            env,
            preset,
            int(seed),
            args.minutes,
            args.threads,
            args.max_steps,
            args.set,
            args.val_seeds,
            args.variant,
        )
        return
    minutes = dict(DEFAULT_MINUTES)
    if args.minutes_per_run:
        if "=" in args.minutes_per_run:
            minutes.update({k: float(v) for k, v in (x.split("=") for x in args.minutes_per_run.split(","))})
        else:
            minutes = {k: float(args.minutes_per_run) for k in ENVS}
    envs = [args.only] if args.only else list(ENVS)
    if not args.report_only:
        commands = [
            [
                sys.executable,
                __file__,
                "--one",
                env,
                preset,
                seed,
                "--minutes",
                str(minutes[env]),
                "--threads",
                str(args.threads),
                "--max-steps",
                str(args.max_steps),
                "--val-seeds",
                str(args.val_seeds),
                "--variant",
                args.variant,
            ]
            + [f"--set={item}" for item in args.set]
            for env in envs
            for seed in args.seeds.split(",")
            for preset in args.presets.split(",")
        ]
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            list(pool.map(lambda command: subprocess.run(command, check=True), commands))
    table(envs)
    spread(envs)
    for env in envs:
        policies = reference_policies(env, args.val_seeds)
        print(
            f"{env}, policies without a model on the same {args.val_seeds} validation seeds (10 actions): "
            + ", ".join(f"{name} {value:.2f}" for name, value in policies.items())
        )
    for env in envs:
        plot(env)


if __name__ == "__main__":
    main()
