"""SFT vs RL vs SFT-then-RL at tiny scale (the paper's Appendix C comparison), over several seeds.

    ECHOLAB_THREADS=1 nice -n 10 .venv/bin/python bench/sft_vs_rl.py --env bandit --seeds 0 1 2 --steps 30 \
        [--episodes 256] [--noise 0.5] [--val-seeds 128] [--out /tmp/sft_vs_rl]

Per seed: SFT on a noisy oracle (validated), StarPO-S from the untrained tiny model, and StarPO-S from the
SFT model (model.warm_start). Each RL run is validated before training and at its last step on the same
fixed validation seeds; the table gives per-setting mean and standard error over seeds, median and worst.
"""

import argparse
import math
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import torch  # noqa: E402

from trainer.config import TrainConfig  # noqa: E402
from trainer.loop import Trainer, train  # noqa: E402
from trainer.sft import sft  # noqa: E402
from trainer.sink import MemorySink  # noqa: E402


def validated(cfg: TrainConfig) -> float:
    return Trainer(cfg).validate()


def rl(cfg: TrainConfig, out: Path) -> tuple[float, float]:
    start = validated(cfg)
    sink = MemorySink()
    train(cfg, sink, str(out))
    return start, sink.rows[-1]["val/success"]


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
    args = parser.parse_args()
    torch.set_num_threads(1)
    out = Path(args.out)
    common = {
        "env": {"name": args.env},
        "rollout": {"val_seeds": args.val_seeds},
        "schedule": {"steps": args.steps, "val_every": args.steps, "checkpoint_every": 0},
    }
    results: dict[str, list] = {"sft": [], "rl": [], "sft-then-rl": []}
    for seed in args.seeds:
        t0 = time.time()
        folder = out / f"sft-seed{seed}"
        sft(TrainConfig.preset("starpo-s", seed=seed, **common), str(folder), args.episodes, args.noise)
        warm = TrainConfig.preset("starpo-s", seed=seed, model={"warm_start": str(folder)}, **common)
        results["sft"].append(validated(warm))
        results["rl"].append(rl(TrainConfig.preset("starpo-s", seed=seed, **common), out / f"rl-seed{seed}"))
        results["sft-then-rl"].append(rl(warm, out / f"sft-rl-seed{seed}"))
        print(
            f"seed {seed}: sft {results['sft'][-1]:.3f}; rl {results['rl'][-1][0]:.3f} -> "
            f"{results['rl'][-1][1]:.3f}; sft-then-rl {results['sft-then-rl'][-1][0]:.3f} -> "
            f"{results['sft-then-rl'][-1][1]:.3f} ({time.time() - t0:.0f} s)",
            flush=True,
        )
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
