"""Cost of the template-collapse estimate (trainer/collapse.py) as a share of training step time.

    .venv/bin/python bench/collapse.py [--env bandit] [--steps 10] [--every 5] [--threads 1] [--set K=V ...]

Trains the tiny profile (model.name tiny, StarPO-S) for --steps steps with diagnostics.collapse_every
= --every and prints, from the run's own metrics: the time spent cross-scoring (time/collapse_s) over
the total step time, averaged over all steps (the goal is under 10% at the default schedule), and per
measured step. Both numbers come from the same run, so the machine's load cancels out of the share.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default="bandit")
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--every", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from trainer.config import TrainConfig
    from trainer.loop import train
    from trainer.sink import JsonlSink

    cfg = TrainConfig.preset(
        "starpo-s",
        *args.set,
        f"diagnostics.collapse_every={args.every}",
        env={"name": args.env},
        schedule={"steps": args.steps, "val_every": 0, "checkpoint_every": 0},
    )
    with tempfile.TemporaryDirectory() as out, open(os.devnull, "w") as quiet:
        train(cfg, JsonlSink(out, cfg.to_yaml(), stream=quiet), out)
        rows = [json.loads(line) for line in Path(out, "metrics.jsonl").read_text().splitlines()]
    measured = [r for r in rows if "time/collapse_s" in r]
    step_s = sum(r["time/step_s"] for r in rows)
    collapse_s = sum(r["time/collapse_s"] for r in measured)
    r = cfg.rollout
    print(
        f"{args.env}, P={r.env_groups} x N={r.group_size}, {args.steps} steps, "
        f"collapse_every={args.every}, {cfg.diagnostics.collapse_samples} pairs, "
        f"micro-batch {cfg.optim.micro_batch_size}, {args.threads} thread(s)"
    )
    print("| measure | value |")
    print("|---|---|")
    print(f"| steps measured | {len(measured)} of {len(rows)} |")
    scored = [m.get("collapse/num_samples", 0) * m.get("collapse/num_prompts", 0) for m in measured]
    print(f"| pairs x prompts scored per measurement (mean) | {statistics.fmean(scored):.0f} |")
    # The trajectory variant scores each distinct drawn pair once against its distinct prompts.
    traj = [m.get("collapse/traj/num_samples", 0) * m.get("collapse/traj/num_prompts", 0) for m in measured]
    print(f"| trajectory variant: draws x prompts per measurement (mean) | {statistics.fmean(traj):.0f} |")
    print(f"| cross-scoring time per measured step (mean) | {collapse_s / max(len(measured), 1):.2f} s |")
    print(f"| step time (mean, all steps) | {step_s / len(rows):.2f} s |")
    print(f"| share of step time, averaged over all steps | **{collapse_s / step_s:.1%}** |")
    print(
        f"| share on the measured steps alone | "
        f"{collapse_s / max(sum(m['time/step_s'] for m in measured), 1e-9):.1%} |"
    )


if __name__ == "__main__":
    main()
