#!/usr/bin/env bash
# GPU benchmark. The paper's configuration on a Qwen2.5-0.5B-sized
# model with random weights (built locally by bench/memory.py, nothing downloaded): P=8 groups x N=16
# rollouts, 5 turns, 400 tokens/turn, StarPO-S (PPO + critic), FrozenLake 4x4, bf16 autocast.
# For full fine-tuning and LoRA (rank 64): steps/hour (from the trainer's time/step_s, median of the
# steps after the first) and peak GPU memory (the highest of the trainer's per-step
# perf/max_memory_allocated_gb, torch.cuda.max_memory_allocated since each step began). Each step
# prints a line as it ends, so a run cut short still reports. Random weights never write `</answer>`:
# every turn runs its 400 tokens, the longest episodes the configuration allows. The template-collapse
# probe is off (diagnostics.collapse_every=0): its cost is measured apart (bench/collapse.py).
#
#   bash bench/gpu.sh [STEPS]        # default 6 steps per mode; writes bench/out/gpu/*.json and a table
set -euo pipefail
cd "$(dirname "$0")/.."
STEPS=${1:-6}
PY=${PY:-.venv/bin/python}
OUT=bench/out/gpu
mkdir -p "$OUT"
$PY -c "import torch; assert torch.cuda.is_available(), 'no CUDA device'; print(torch.cuda.get_device_name(0))"
$PY -c "import sys; sys.path.insert(0, 'bench'); import memory; memory.build()"

for MODE in full lora; do
  RANK=0; [ "$MODE" = lora ] && RANK=64
  $PY - "$MODE" "$RANK" "$STEPS" "$OUT" <<'EOF'
import json, statistics, sys, tempfile
import torch
from trainer.config import TrainConfig
from trainer.loop import train
from trainer.sink import MemorySink
mode, rank, steps, out = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
cfg = TrainConfig.preset("starpo-s", env={"name": "frozenlake"},
                         model={"name": "bench/out/qwen05-random", "lora_rank": rank, "dtype": "auto"},
                         rollout={"env_groups": 8, "group_size": 16, "max_turns": 5, "max_new_tokens": 400},
                         schedule={"steps": steps, "val_every": 0, "checkpoint_every": 0},
                         diagnostics={"collapse_every": 0})
class Progress(MemorySink):
    def metrics(self, step, values):
        super().metrics(step, values)
        print(json.dumps({"mode": mode, "step": step, "step_s": round(values["time/step_s"], 2),
                          "rollout_s": round(values["time/rollout_s"], 2), "update_s": round(values["time/update_s"], 2),
                          "peak_gib": round(values["perf/max_memory_allocated_gb"], 2)}), flush=True)
sink = Progress()
with tempfile.TemporaryDirectory() as d:
    train(cfg, sink, d)
step_s = statistics.median(r["time/step_s"] for r in sink.rows[1:])
split = {k: statistics.median(r[f"time/{k}_s"] for r in sink.rows[1:]) for k in ("rollout", "update")}
result = {"mode": mode, "steps": steps, "median_step_s": step_s, "steps_per_hour": 3600 / step_s,
          "median_rollout_s": split["rollout"], "median_update_s": split["update"],
          "peak_gpu_gib": max(r["perf/max_memory_allocated_gb"] for r in sink.rows),
          "tokens_per_s": statistics.median(r["perf/tokens_per_s"] for r in sink.rows[1:]),
          "response_tokens_mean": statistics.mean(r["response/tokens_mean"] for r in sink.rows)}
json.dump(result, open(f"{out}/{mode}.json", "w"))
print(json.dumps(result))
EOF
done

$PY - "$OUT" <<'EOF'
import json, sys
print("| mode | median step (s): rollout + update | steps/hour | rollout tokens/s | peak GPU memory (max_memory_allocated) |")
print("|---|---|---|---|---|")
for mode in ("full", "lora"):
    r = json.load(open(f"{sys.argv[1]}/{mode}.json"))
    print(f"| {mode} | {r['median_step_s']:.1f}: {r['median_rollout_s']:.1f} + {r['median_update_s']:.1f} | {r['steps_per_hour']:.0f} | {r['tokens_per_s']:.0f} | {r['peak_gpu_gib']:.1f} GiB |")
EOF
