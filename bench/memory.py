"""Peak memory of one update step of a Qwen2.5-0.5B-sized model on CPU: full fine-tuning vs LoRA.

    .venv/bin/python bench/memory.py [--seqs 4] [--seq-len 512] [--threads 2] [--modes full,lora]

The model has Qwen2.5-0.5B's shape (hidden 896, 24 layers, 14 heads / 2 KV heads, intermediate 4864,
vocab 151936, tied embeddings) with random weights, built here and saved once to
bench/out/qwen05-random/ (nothing is downloaded; the tiny model's tokenizer is copied next to it, the
ids fed are random anyway). Each mode runs in a fresh subprocess: our `Trainer` (trainer/loop.py) with
GRPO advantages and no KL (no critic, no reference copy), gradient checkpointing on, fp32, one
mini-batch of `seqs` trajectories of `seq_len` tokens (the second half is the reply) accumulated over
micro-batches of 1, then one AdamW step. Peak RSS is the process's ru_maxrss (Linux: KiB), read after
loading and after the update.
"""

import argparse
import json
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
MODEL = ROOT / "bench/out/qwen05-random"


def gib_maxrss():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20


def build():
    if (MODEL / "config.json").exists():
        return
    import torch
    from transformers import AutoModelForCausalLM, Qwen2Config

    from trainer import tiny_model

    torch.manual_seed(0)
    cfg = Qwen2Config(
        hidden_size=896,
        num_hidden_layers=24,
        num_attention_heads=14,
        num_key_value_heads=2,
        intermediate_size=4864,
        vocab_size=151936,
        max_position_embeddings=32768,
        tie_word_embeddings=True,
        rms_norm_eps=1e-6,
        rope_theta=1000000.0,
    )
    model = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    tmp = MODEL.with_name(MODEL.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tiny = Path(tiny_model.ensure())
    for f in tiny.iterdir():
        if f.name.startswith(("tokenizer", "special_tokens", "chat_template")):
            shutil.copy(f, tmp / f.name)
    tmp.rename(MODEL)


def one(mode, seqs, seq_len, threads):
    import torch

    torch.set_num_threads(threads)
    from trainer.config import TrainConfig
    from trainer.loop import Trainer
    from trainer.rollout import Trajectory

    cfg = TrainConfig.preset(
        "grpo",
        model={
            "name": str(MODEL),
            "dtype": "float32",
            "lora_rank": 64 if mode == "lora" else 0,
            "gradient_checkpointing": True,
        },
        algorithm={"kl_coef": 0.0},
        rollout={"group_size": 2},
        optim={"mini_batch_size": seqs, "micro_batch_size": 1},
    )
    t0 = time.time()
    trainer = Trainer(cfg)
    n_params = sum(p.numel() for p in trainer.policy.model.parameters())
    n_train = sum(p.numel() for p in trainer.actor_params)
    after_load = gib_maxrss()
    g = torch.Generator().manual_seed(0)
    trajs = []
    for i in range(seqs):
        ids = torch.randint(0, 151936, (seq_len,), generator=g).tolist()
        trajs.append(
            Trajectory(
                group=i // 2,
                seed=i,
                ids=ids,
                mask=[0] * (seq_len // 2) + [1] * (seq_len - seq_len // 2),
                reward=float(i % 2),
            )
        )
    t1 = time.time()
    metrics = trainer.update(trajs, torch.tensor([t.group for t in trajs]))
    print(
        "RESULT "
        + json.dumps(
            {
                "mode": mode,
                "params": n_params,
                "trainable": n_train,
                "rss_after_load_gib": after_load,
                "peak_rss_gib": gib_maxrss(),
                "load_s": t1 - t0,
                "update_s": time.time() - t1,
                "grad_norm": metrics["actor/grad_norm"],
            }
        )
    )


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--seqs", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=512)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--modes", default="full,lora")
    p.add_argument("--one", help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.one:
        one(args.one, args.seqs, args.seq_len, args.threads)
        return
    build()
    results = []
    for mode in args.modes.split(","):
        proc = subprocess.run(
            [
                sys.executable,
                __file__,
                "--one",
                mode,
                "--seqs",
                str(args.seqs),
                "--seq-len",
                str(args.seq_len),
                "--threads",
                str(args.threads),
            ],
            capture_output=True,
            text=True,
        )
        line = next((ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")), None)
        if proc.returncode or line is None:
            print(proc.stderr[-3000:])
            raise SystemExit(f"mode {mode} failed (rc {proc.returncode})")
        results.append(json.loads(line[len("RESULT ") :]))
        print(line, flush=True)
    print(
        f"| mode | parameters (trainable) | RSS after load | peak RSS (one update, {args.seqs} x {args.seq_len} "
        "tokens, micro-batch 1, grad. checkpointing) | update time |"
    )
    print("|---|---|---|---|---|")
    for r in results:
        print(
            f"| {r['mode']} | {r['params'] / 1e6:.0f}M ({r['trainable'] / 1e6:.1f}M) "
            f"| {r['rss_after_load_gib']:.2f} GiB "
            f"| {r['peak_rss_gib']:.2f} GiB | {r['update_s']:.0f} s |"
        )


if __name__ == "__main__":
    main()
