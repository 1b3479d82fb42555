"""Our batched generation (trainer.rollout.generate) vs a bare `model.generate`, same prompts, same lengths.

    .venv/bin/python bench/rollout.py [--env bandit] [--batch 128] [--repeats 5] [--threads 1]

The prompts are the first-turn prompts of `batch` environments (the rollout's own ChatFormat), left
padded. Ours samples with its stop checks (`</answer>` / EOS per row) and runs until every row has
stopped, L decode steps; then `model.generate` (do_sample, same temperature, KV cache) is forced to
exactly L new tokens for every row (min_new_tokens = max_new_tokens = L), so both do the same forwards
over the same batch. After one untimed call of each, `repeats` rounds, each with its own sampling seed;
the side that runs first alternates from round to round (a round where `model.generate` goes first takes
L from an untimed run of ours with the same seed beforehand: the same seed samples the same tokens).
Throughput = batch x L / seconds for both; the number reported is the time ratio ours / bare, the median
over the rounds and their range.
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
    p.add_argument("--env", default="bandit")
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--threads", type=int, default=1)
    args = p.parse_args()
    load_before = os.getloadavg()

    import torch

    torch.set_num_threads(args.threads)
    import envs
    from trainer.config import TrainConfig
    from trainer.models import load_policy
    from trainer.rollout import ChatFormat, first_user_message, generate

    cfg = TrainConfig.preset("starpo-s", env={"name": args.env})
    policy = load_policy(cfg.model, with_critic=False, with_reference=False)
    model, tok = policy.model.eval(), policy.tokenizer
    chat = ChatFormat(tok, thinking=True)
    prompts = []
    for seed in range(args.batch):
        env = envs.make(args.env)
        obs = env.reset(seed=seed)
        prompts.append(
            chat.first_prompt(
                first_user_message(
                    env, obs, cfg.rollout.max_actions_per_turn, cfg.rollout.max_actions_per_episode, True
                )
            )
        )
    pad_id = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    T = max(len(x) for x in prompts)
    ids = torch.full((len(prompts), T), pad_id, dtype=torch.long)
    attention = torch.zeros_like(ids)
    for i, x in enumerate(prompts):
        ids[i, T - len(x) :] = torch.tensor(x)
        attention[i, T - len(x) :] = 1
    limits = [args.max_new_tokens] * len(prompts)

    def ours(seed):
        torch.manual_seed(seed)
        start = time.perf_counter()
        out = generate(model, prompts, limits, pad_id, chat.stop_ids, tok, 1.0, 1.0)
        return time.perf_counter() - start, max(len(g) for g in out), sum(len(g) for g in out)

    def bare(seed, steps):
        torch.manual_seed(seed)
        start = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                input_ids=ids,
                attention_mask=attention,
                do_sample=True,
                temperature=1.0,
                top_p=1.0,
                top_k=0,
                max_new_tokens=steps,
                min_new_tokens=steps,
                pad_token_id=pad_id,
            )
        assert out.shape[1] - T == steps
        return time.perf_counter() - start

    ours(0), bare(0, 8)  # warm up
    # The decode steps of the rounds where model.generate goes first, from an untimed run of ours.
    planned = {r: ours(r + 1)[1] for r in range(1, args.repeats, 2)}
    rows = []
    for r in range(args.repeats):
        if r % 2 == 0:
            t_ours, steps, useful = ours(r + 1)
            t_bare = bare(r + 1, steps)
        else:
            t_bare = bare(r + 1, planned[r])
            t_ours, steps, useful = ours(r + 1)
            assert steps == planned[r], "the same seed sampled a different length"
        rows.append((t_ours, t_bare, steps, useful))
        first = "ours" if r % 2 == 0 else "model.generate"
        print(
            f"round {r} ({first} first): {steps} decode steps x {len(prompts)} rows ({useful} tokens before the "
            f"stops): ours {t_ours:.2f} s, model.generate {t_bare:.2f} s, ratio {t_ours / t_bare:.3f}",
            flush=True,
        )
    ratios = [a / b for a, b, _, _ in rows]
    tps_ours = statistics.median(len(prompts) * s / a for a, _, s, _ in rows)
    tps_bare = statistics.median(len(prompts) * s / b for _, b, s, _ in rows)
    print(
        "| env | batch | decode steps (median) | ours tokens/s | model.generate tokens/s "
        "| time ratio ours / generate: median (range) |"
    )
    print("|---|---|---|---|---|---|")
    print(
        f"| {args.env} | {len(prompts)} | {statistics.median(s for *_, s, _ in rows)} | {tps_ours:.0f} "
        f"| {tps_bare:.0f} | {statistics.median(ratios):.3f} ({min(ratios):.3f}-{max(ratios):.3f}; overhead "
        f"{statistics.median(ratios) - 1:+.1%}) |"
    )
    print(
        f"load average before: {' '.join(f'{v:.2f}' for v in load_before)}, after: "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} ({os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
