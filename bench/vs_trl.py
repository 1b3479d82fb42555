"""Step time of our trainer vs TRL's GRPOTrainer: single-turn Bandit, the tiny model, 64 completions.

    .venv/bin/python bench/vs_trl.py [--steps 12] [--warmup 2] [--threads 1] [--trl-python PYTHON]

TRL comes with the dev requirements (requirements-dev.txt), so both sides run on .venv's python by default;
--trl-python picks another virtualenv's python for the TRL side.

Both sides on the same machine, taking turns step by step: each runs in its own process and waits at a
gate before every step (ours: the loop's `should_stop`; TRL: a callback's on_step_begin) until this
script lets it go; one side's step runs, then the other's, and the side that goes first alternates
from pair to pair, so both see the same machine load. The first --warmup pairs are dropped; the result
is the median over the remaining pairs of (our step time / TRL's step time), with the range of those
per-pair ratios as the spread. The same tiny model (var/models/tiny), the same first-turn Bandit prompts
(our ChatFormat text, `<think>` opener included, given to TRL as plain-text prompts), 4 prompts x 16
completions = 64 completions per step, at most 64 new tokens, temperature 1, GRPO advantages, no KL,
the same actor lr (--lr), one optimizer step per batch of 64 (no micro-batching), fp32 on CPU, no
gradient checkpointing on either side (TRL's GRPOConfig turns it on by default; ours is off). Ours:
`train()` with `--preset grpo`, rollout.max_turns=1. TRL: GRPOTrainer with num_generations=16,
per_device_train_batch_size=64, steps_per_generation=1, a reward function that plays the Bandit answer
the way our rollout does, and (unless --trl-eos-only) `</answer>` added to the model's
generation_config.eos_token_id (TRL's own EOS list) so that TRL stops where our rollout stops
(otherwise it samples all 64 tokens: the tiny model rarely emits EOS after `</answer>`).
Step time: our `time/step_s`; TRL's from a callback (on_step_begin -> on_step_end).
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

GROUPS, GROUP_SIZE, MAX_NEW = 4, 16, 64
READY = "BENCH READY"  # a side's line to this script: at the gate before a step
RESULT = "RESULT "  # a side's last line: its step times, as JSON


def wait_for_turn() -> None:
    """In a side's process, before each step: say so, and block until the bench lets this step run."""
    print(READY, flush=True)
    if sys.stdin.readline().strip() != "go":
        raise SystemExit("the bench stopped this side")


def prompts(n):
    import envs
    from trainer.models import load_tokenizer, resolve
    from trainer.rollout import ChatFormat, first_user_message

    path, local = resolve("tiny")
    tok = load_tokenizer(path, local)
    chat = ChatFormat(tok, thinking=True)
    out = []
    for seed in range(10_000, 10_000 + n):
        env = envs.make("bandit")
        obs = env.reset(seed=seed)
        msgs = [
            {
                "role": "system",
                "content": "You are a helpful assistant. You play text games: think step by "
                "step, then answer with actions.",
            },
            {"role": "user", "content": first_user_message(env, obs, 5, 10, True)},
        ]
        text = tok.apply_chat_template(msgs, tokenize=False, add_generation_prompt=True) + chat.opener
        assert tok(text, add_special_tokens=False)["input_ids"] == chat.first_prompt(msgs[1]["content"])
        out.append({"prompt": text, "seed": seed})
    return path, chat, out


def ours(steps, threads, lr):
    import torch

    torch.set_num_threads(threads)
    from trainer.config import TrainConfig
    from trainer.loop import train
    from trainer.sink import MemorySink

    cfg = TrainConfig.preset(
        "grpo",
        env={"name": "bandit"},
        rollout={"env_groups": GROUPS, "group_size": GROUP_SIZE, "max_turns": 1, "max_new_tokens": MAX_NEW},
        algorithm={"kl_coef": 0.0},
        optim={
            "actor_lr": lr,
            "mini_batch_size": GROUPS * GROUP_SIZE,
            "micro_batch_size": GROUPS * GROUP_SIZE,
        },
        schedule={"steps": steps, "val_every": 0, "checkpoint_every": 0, "samples_per_step": 0},
    )
    sink = MemorySink()

    def gate() -> bool:  # the loop asks before each step, before its step clock starts
        wait_for_turn()
        return False

    with tempfile.TemporaryDirectory() as out:
        train(cfg, sink, out, should_stop=gate)
    print(
        RESULT
        + json.dumps(
            {
                "times": [r["time/step_s"] for r in sink.rows],
                "lengths": [r["response/tokens_mean"] for r in sink.rows],
                "split": [(r["time/rollout_s"], r["time/update_s"]) for r in sink.rows],
            }
        ),
        flush=True,
    )


def trl_side(steps, threads, stop_answer, lr):
    import torch

    torch.set_num_threads(threads)
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    import envs

    path, chat, rows = prompts(512)
    policy_model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    from trainer.models import load_tokenizer

    tokenizer = load_tokenizer(path, True)

    def bandit_reward(prompts, completions, seed, **_):
        rewards = []
        for text, s in zip(completions, seed):
            env = envs.make("bandit")
            env.reset(seed=s)
            parsed = chat.parse(text)
            words = env.parse_actions(parsed[1])[:5] if parsed else []
            valid = [w for w in words if w in env.actions]
            r = 0.0
            for w in valid:
                _, rew, done, _ = env.step(w)
                r += rew
                if done:
                    break
            ok = parsed is not None and valid and len(valid) == len(words)
            rewards.append(r + (0.0 if ok else -0.1))
        return rewards

    if stop_answer:  # stop where our rollout stops: `</answer>` is one token of the tiny tokenizer
        answer_id = tokenizer.convert_tokens_to_ids("</answer>")
        assert tokenizer.decode([answer_id]) == "</answer>"
        # TRL reads its EOS ids from the model's generation config, for generation and for the mask
        policy_model.generation_config.eos_token_id = sorted(chat.stop_ids | {answer_id})
    times, lengths = [], []

    class Timer(TrainerCallback):
        def on_step_begin(self, args, state, control, **kw):
            wait_for_turn()
            self.t = time.perf_counter()

        def on_step_end(self, args, state, control, **kw):
            times.append(time.perf_counter() - self.t)

        def on_log(self, args, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs:
                lengths.append(logs["completions/mean_length"])

    with tempfile.TemporaryDirectory() as out:
        config = GRPOConfig(
            output_dir=out,
            learning_rate=lr,
            num_generations=GROUP_SIZE,
            per_device_train_batch_size=GROUPS * GROUP_SIZE,
            gradient_accumulation_steps=1,
            steps_per_generation=1,
            max_completion_length=MAX_NEW,
            gradient_checkpointing=False,  # TRL's default is on; ours is off
            temperature=1.0,
            top_p=1.0,
            beta=0.0,
            max_steps=steps,
            logging_steps=1,
            report_to="none",
            save_strategy="no",
            use_cpu=True,
            bf16=False,
            fp16=False,
            weight_decay=0.01,
            max_grad_norm=1.0,
            lr_scheduler_type="constant",
            warmup_steps=0,
            dataloader_num_workers=0,
            disable_tqdm=True,
            seed=0,
        )
        trainer = GRPOTrainer(
            model=policy_model,
            reward_funcs=bandit_reward,
            args=config,
            train_dataset=Dataset.from_list(rows),
            processing_class=tokenizer,
            callbacks=[Timer()],
        )
        trainer.train()
    import transformers
    import trl

    print(
        RESULT
        + json.dumps(
            {
                "times": times,
                "lengths": lengths,
                "trl": trl.__version__,
                "transformers": transformers.__version__,
            }
        ),
        flush=True,
    )


class Side:
    """One side's process, stepped by the bench: `step()` lets one step run and returns when it has ended."""

    def __init__(self, name: str, command: list[str], env: dict, log: Path):
        self.name, self.log, self.result = name, log, None
        self.proc = subprocess.Popen(
            command,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(log, "w"),
            text=True,
            bufsize=1,
        )

    def wait(self) -> None:
        """Until the side stands at its next gate, or has finished and printed its result."""
        for line in self.proc.stdout:
            if line.strip() == READY:
                return
            if line.startswith(RESULT):
                self.result = json.loads(line[len(RESULT) :])
                self.proc.wait()
                return
        self.proc.wait()
        raise SystemExit(f"the {self.name} side ended without a result:\n{self.log.read_text()[-3000:]}")

    def step(self) -> None:
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        self.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trl-python", default=sys.executable, help="python of the TRL side (default: this one)")
    p.add_argument("--steps", type=int, default=12, help="steps per side, warm-up included")
    p.add_argument("--warmup", type=int, default=2, help="first pairs of steps not counted")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument(
        "--lr",
        type=float,
        default=1e-6,
        help="actor lr of both; small by default so that the policy, and with it the reply lengths, "
        "stay those of the untrained model on both sides (at 1e-3 they drift apart in 12 steps)",
    )
    p.add_argument(
        "--trl-eos-only",
        action="store_true",
        help="let TRL stop only at EOS (default: also at `</answer>`, as our rollout does)",
    )
    p.add_argument("--side", choices=("ours", "trl"), help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.side == "ours":
        ours(args.steps, args.threads, args.lr)
        return
    if args.side == "trl":
        trl_side(args.steps, args.threads, not args.trl_eos_only, args.lr)
        return
    if args.steps <= args.warmup:
        p.error("--steps must exceed --warmup")

    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads), "TOKENIZERS_PARALLELISM": "false"}
    common = ["--steps", str(args.steps), "--threads", str(args.threads), "--lr", str(args.lr)]
    logs = ROOT / "var" / "bench" / "vs_trl"
    logs.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()
    sides = [
        Side("ours", [sys.executable, __file__, "--side", "ours", *common], env, logs / "ours.log"),
        Side(
            "TRL",
            [args.trl_python, __file__, "--side", "trl", *common]
            + (["--trl-eos-only"] if args.trl_eos_only else []),
            env,
            logs / "trl.log",
        ),
    ]
    try:
        for side in sides:
            side.wait()  # loaded, at the first gate
        for pair in range(args.steps):
            for side in sides if pair % 2 == 0 else sides[::-1]:
                side.step()
                print(f"pair {pair}: {side.name} step done", flush=True)
    finally:
        for side in sides:
            if side.proc.poll() is None:
                side.proc.kill()
    ours_result, trl = sides[0].result, sides[1].result
    w = args.warmup
    our_times, trl_times = ours_result["times"], trl["times"]
    ratios = [a / b for a, b in zip(our_times[w:], trl_times[w:])]
    split = ours_result["split"][w:]
    print(f"ours step times (s): {[round(t, 2) for t in our_times]}")
    print(
        f"TRL {trl['trl']} (transformers {trl['transformers']}) step times (s): {[round(t, 2) for t in trl_times]}"
    )
    print(f"per-pair ratios ours / TRL after {w} warm-up pairs: {[round(r, 2) for r in ratios]}")
    la = statistics.mean(ours_result["lengths"][w:])
    lb = statistics.mean(trl["lengths"][w:]) if trl["lengths"] else float("nan")
    stops = "EOS only" if args.trl_eos_only else "EOS or `</answer>`"
    print("| | median step time (s) | mean completion tokens |")
    print("|---|---|---|")
    print(
        f"| ours (grpo, 1 turn): rollout {statistics.median(a for a, _ in split):.2f} s + update "
        f"{statistics.median(b for _, b in split):.2f} s | {statistics.median(our_times[w:]):.2f} | {la:.1f} |"
    )
    print(
        f"| TRL GRPOTrainer {trl['trl']} (stops at {stops}) | {statistics.median(trl_times[w:]):.2f} | {lb:.1f} |"
    )
    print(
        f"| ours / TRL, median of {len(ratios)} alternating pairs (range) | {statistics.median(ratios):.2f} "
        f"({min(ratios):.2f}-{max(ratios):.2f}) | |"
    )
    print(
        f"load average before: {' '.join(f'{v:.2f}' for v in load_before)}, after: "
        f"{' '.join(f'{v:.2f}' for v in os.getloadavg())} ({os.cpu_count()} CPUs)"
    )


if __name__ == "__main__":
    main()
