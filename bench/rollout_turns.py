"""Multi-turn rollouts: each turn continuing from the conversation's KV cache vs prefilling each turn's
whole conversation again, the same episodes.

    .venv/bin/python bench/rollout_turns.py [--env frozenlake] [--repeats 4] [--threads 1]

One step's episodes of the preset (tiny profile: P=8 groups x N=16, the environment's turns), played by
`trainer.rollout.rollout` with keep_cache on and off. Each round has its own sampling seed and both sides
use it, so both play the same episodes and sample the same tokens (the script checks the generated token
counts agree); after one untimed round, the side that runs first alternates from round to round. The
number reported is the time ratio cached / prefilled, the median over the rounds and their range.
"""

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env", default="frozenlake")
    p.add_argument("--preset", default="starpo-s")
    p.add_argument("--repeats", type=int, default=4)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    load_before = os.getloadavg()

    import torch

    torch.set_num_threads(args.threads)
    from trainer.config import TrainConfig
    from trainer.models import load_policy
    from trainer.rollout import ChatFormat, rollout

    cfg = TrainConfig.preset(args.preset, env={"name": args.env})
    policy = load_policy(cfg.model, with_critic=False, with_reference=False)
    policy.model.eval()
    chat = ChatFormat(policy.tokenizer, cfg.rollout.thinking)
    P, N = cfg.rollout.env_groups, cfg.rollout.group_size

    def play(seed: int, keep_cache: bool) -> tuple[float, int]:
        seeds = [10_000 + P * seed + g for g in range(P) for _ in range(N)]
        torch.manual_seed(seed)
        start = time.perf_counter()
        with torch.no_grad():
            trajs = rollout(
                policy.model,
                policy.tokenizer,
                chat,
                args.env,
                cfg.env.params,
                seeds,
                [g for g in range(P) for _ in range(N)],
                cfg.rollout,
                cfg.rollout.temperature,
                policy.context_len,
                keep_cache=keep_cache,
            )
        return time.perf_counter() - start, sum(t.response_tokens for t in trajs)

    play(0, True), play(0, False)  # warm up
    rows = []
    for r in range(1, args.repeats + 1):
        order = (True, False) if r % 2 else (False, True)
        timed = {keep: play(r, keep) for keep in order}
        (cached, tokens), (prefilled, tokens_again) = timed[True], timed[False]
        assert tokens == tokens_again, f"round {r}: the sides sampled different tokens"
        rows.append((cached, prefilled, tokens))
        print(f"round {r}: cached {cached:.2f} s, prefilled {prefilled:.2f} s, {tokens} tokens", flush=True)
    ratios = [c / f for c, f, _ in rows]
    print(
        f"{args.env}, P={P} x N={N}, up to {cfg.rollout.max_turns} turns, {args.threads} thread(s): "
        f"cached {statistics.median(c for c, _, _ in rows):.2f} s, prefilled "
        f"{statistics.median(f for _, f, _ in rows):.2f} s a step (medians); time ratio cached / prefilled: "
        f"median {statistics.median(ratios):.3f} (range {min(ratios):.3f}-{max(ratios):.3f}); "
        f"load average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}"
    )


if __name__ == "__main__":
    main()
