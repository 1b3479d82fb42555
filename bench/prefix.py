"""One update step with and without shared-prefix forwards (trainer/prefix.py), on one rollout batch.

    .venv/bin/python bench/prefix.py [--preset starpo] [--env bandit] [--rounds 2] [--threads 1]

The tiny model with its profile (P=8 x N=16 = 128 trajectories, micro-batches of one group) plays one
batch at temperature 1; then `Trainer.update` runs on that batch alternately with prefix sharing on and
off (off = MIN_SHARED_TOKENS out of reach, so every row runs its whole sequence). Each update moves the
weights, so rounds are not identical work, but both sides see the same sequence of batches' shapes.
"""

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--preset", default="starpo")
    p.add_argument("--env", default="bandit")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from trainer import prefix
    from trainer.config import TrainConfig
    from trainer.loop import Trainer, pad_batch

    cfg = TrainConfig.preset(args.preset, env={"name": args.env})
    trainer = Trainer(cfg)
    r = cfg.rollout
    groups = [g for g in range(r.env_groups) for _ in range(r.group_size)]
    trajs = trainer.play([10_000 + g for g in groups], groups, r.temperature)
    ids, attention, _ = pad_batch(trajs[: cfg.optim.micro_batch_size], trainer.pad_id, trainer.policy.device)
    print(
        f"{len(trajs)} trajectories; first micro-batch {tuple(ids.shape)}, shared prefix "
        f"{prefix.shared_prefix_len(ids, attention)} tokens, rows {attention.sum(1).min().item()}-"
        f"{attention.sum(1).max().item()} tokens"
    )
    times = {"shared": [], "plain": []}
    shared_min = prefix.MIN_SHARED_TOKENS
    for _ in range(args.rounds):
        for side, minimum in (("shared", shared_min), ("plain", 10**9)):
            prefix.MIN_SHARED_TOKENS = minimum
            start = time.perf_counter()
            trainer.update(trajs, torch.tensor(groups))
            times[side].append(time.perf_counter() - start)
    shared, plain = statistics.median(times["shared"]), statistics.median(times["plain"])
    print(
        f"update, median of {args.rounds}: shared prefix {shared:.1f} s, plain {plain:.1f} s, "
        f"ratio {shared / plain:.2f} (rounds: shared {times['shared']}, plain {times['plain']})"
    )


if __name__ == "__main__":
    main()
