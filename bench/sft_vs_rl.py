"""SFT vs RL vs SFT-then-RL at tiny scale (the paper's Appendix C comparison), over several seeds.

    ECHOLAB_THREADS=1 nice -n 10 .venv/bin/python bench/sft_vs_rl.py --env bandit --seeds 0 1 2 --steps 30 \
        [--episodes 256] [--noise 0.5] [--val-seeds 128] [--jobs 2] [--out /tmp/sft_vs_rl]

Per seed: SFT on a noisy oracle (validated), StarPO-S from the untrained tiny model, and StarPO-S from the
SFT model (model.warm_start). Each RL run is validated before training and at its last step on the same
fixed validation seeds; the table gives per-setting mean and standard error over seeds, median and worst.
Seeds run `--jobs` at a time, one torch thread each; each RL run's metrics are kept in OUT/<run>/metrics.jsonl
(bench/real_runs.py takes them into the detector's labelled set).
"""

import argparse
import math
import multiprocessing
import os
import statistics
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from trainer.config import TrainConfig  # noqa: E402
from trainer.loop import Trainer, train  # noqa: E402
from trainer.sft import sft  # noqa: E402
from trainer.sink import JsonlSink  # noqa: E402


def validated(cfg: TrainConfig) -> float:
    return Trainer(cfg).validate()


def rl(cfg: TrainConfig, out: Path) -> tuple[float, float]:
    start = validated(cfg)
    with open(os.devnull, "w") as quiet:
        sink = JsonlSink(str(out), stream=quiet)
        train(cfg, sink, str(out))
    return start, sink.last["val/success"]


def one_seed(seed: int, common: dict, out: Path, episodes: int, noise: float) -> dict:
    """SFT, then RL from the untrained model and from the SFT model, for one seed."""
    torch.set_num_threads(1)
    t0 = time.time()
    folder = out / f"sft-seed{seed}"
    sft(TrainConfig.preset("starpo-s", seed=seed, **common), str(folder), episodes, noise)
    warm = TrainConfig.preset("starpo-s", seed=seed, model={"warm_start": str(folder)}, **common)
    result = {
        "sft": validated(warm),
        "rl": rl(TrainConfig.preset("starpo-s", seed=seed, **common), out / f"rl-seed{seed}"),
        "sft-then-rl": rl(warm, out / f"sft-rl-seed{seed}"),
    }
    print(
        f"seed {seed}: sft {result['sft']:.3f}; rl {result['rl'][0]:.3f} -> {result['rl'][1]:.3f}; "
        f"sft-then-rl {result['sft-then-rl'][0]:.3f} -> {result['sft-then-rl'][1]:.3f} "
        f"({time.time() - t0:.0f} s)",
        flush=True,
    )
    return result


def summary(values: list[float]) -> str:
    mean = statistics.fmean(values)
    se = statistics.stdev(values) / math.sqrt(len(values)) if len(values) > 1 else float("nan")
    return f"{mean:.3f} ± {se:.3f} (median {statistics.median(values):.3f}, worst {min(values):.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--env", default="bandit")
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--episodes", type=int, default=256)
    parser.add_argument("--noise", type=float, default=0.5)
    parser.add_argument("--val-seeds", type=int, default=128)
    parser.add_argument("--out", default="/tmp/sft_vs_rl")
    parser.add_argument("--jobs", type=int, default=2, help="seeds at once (one per core)")
    args = parser.parse_args()
    out = Path(args.out)
    common = {
        "env": {"name": args.env},
        "rollout": {"val_seeds": args.val_seeds},
        "schedule": {"steps": args.steps, "val_every": args.steps, "checkpoint_every": 0},
    }
    # spawn: a forked child would inherit torch's thread pools from the parent
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(args.jobs, mp_context=context) as pool:
        futures = [pool.submit(one_seed, seed, common, out, args.episodes, args.noise) for seed in args.seeds]
        per_seed = [f.result() for f in futures]
    results = {name: [r[name] for r in per_seed] for name in ("sft", "rl", "sft-then-rl")}
    print(
        f"\n{args.env}, {len(args.seeds)} seeds, {args.steps} RL steps, SFT {args.episodes} episodes at "
        f"noise {args.noise}, validation success on {args.val_seeds} seeds (mean ± standard error):"
    )
    print(f"  sft:                {summary(results['sft'])}")
    for name in ("rl", "sft-then-rl"):
        print(f"  {name + ' start:':<20}{summary([s for s, _ in results[name]])}")
        print(f"  {name + ' end:':<20}{summary([e for _, e in results[name]])}")


if __name__ == "__main__":
    main()
