"""Worker benchmark: what the database sink sustains into Postgres, and what it costs a training step.

    createdb -h 127.0.0.1 -U postgres echolab_bench   # once
    export DATABASE_URL=postgres://postgres@127.0.0.1:5432/echolab_bench
    .venv/bin/python manage.py migrate && .venv/bin/python bench/worker.py

1. rows/s: the trainer's side of DatabaseSink fed as fast as it can take it (STEPS x KEYS metric points
   plus samples), until close() has written everything to Postgres.
2. overhead: the tiny model trained for a few steps with DatabaseSink (+ the Echo Trap hook, as the worker
   runs it) and with the trainer's NullSink, alternately, in this process; the step time is the wall time
   between consecutive progress() calls, so it includes everything the sink does on the trainer's thread.
   Reported as the ratio of median step times (target: under 1.05).

It creates a throwaway user/experiment/run in the database DATABASE_URL names and deletes them at the end.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

import django  # noqa: E402

django.setup()

from django.contrib.auth import get_user_model  # noqa: E402

from webapp.experiments.models import Experiment, Run  # noqa: E402
from webapp.metrics.models import MetricPoint  # noqa: E402
from worker.detection import EchoTrapHook  # noqa: E402
from worker.sink import DatabaseSink  # noqa: E402


def new_run(owner, config, label):
    experiment = Experiment.objects.create(owner=owner, name=f"bench {label}", config=config, seeds=[0])
    run = Run.objects.create(experiment=experiment, label=label, config=config)
    run.claim("bench", os.getpid(), "cpu")
    return run


def bench_rows(owner, steps, keys):
    run = new_run(owner, {}, "rows")
    names = [f"bench/key_{k:02d}" for k in range(keys)]
    sink = DatabaseSink(run, flush_interval=2.0)
    start = time.perf_counter()
    for step in range(steps):
        sink.metrics(step, {name: step * 0.001 + k for k, name in enumerate(names)})
        sink.samples(step, [{"answer": "Left", "reward": 1.0}] * 4)
        sink.progress(step + 1, steps)
    fed = time.perf_counter() - start
    sink.close()
    total = time.perf_counter() - start
    written = MetricPoint.objects.filter(run=run).count()
    assert written == steps * keys, (written, steps * keys)
    return written, fed, total


class StepClock:
    """Wraps a sink; notes the time of every progress() call."""

    def __init__(self, inner):
        self.inner, self.marks = inner, []

    def metrics(self, step, values):
        self.inner.metrics(step, values)

    def samples(self, step, samples):
        self.inner.samples(step, samples)

    def records(self, step, key, values):
        self.inner.records(step, key, values)

    def checkpoint(self, step, path):
        self.inner.checkpoint(step, path)

    def stored_step(self):
        return self.inner.stored_step()

    def progress(self, step, total):
        self.inner.progress(step, total)
        self.marks.append(time.perf_counter())

    def step_times(self):
        return [b - a for a, b in zip(self.marks, self.marks[1:])]


def bench_overhead(owner, model_dir, steps, rounds):
    import torch

    from trainer.config import TrainConfig
    from trainer.loop import train
    from trainer.sink import NullSink

    torch.set_num_threads(1)
    config = TrainConfig.preset(
        "grpo",
        model={"name": str(model_dir)},
        rollout={"env_groups": 2, "group_size": 4, "max_new_tokens": 16, "max_turns": 1, "val_seeds": 2},
        optim={"mini_batch_size": 8, "micro_batch_size": 8},
        schedule={"steps": steps, "val_every": 0, "checkpoint_every": 0, "samples_per_step": 4},
    )
    times = {"null": [], "database": []}
    for round_ in range(rounds):
        # Alternate which goes first: the machine's load drifts, and a fixed order would bias the ratio.
        for kind in ("null", "database") if round_ % 2 == 0 else ("database", "null"):
            with tempfile.TemporaryDirectory() as out:
                if kind == "null":
                    clock = StepClock(NullSink())
                    train(config, clock, out)
                else:
                    run = new_run(owner, config.to_dict(), f"overhead {round_}")
                    sink = DatabaseSink(run, hook=EchoTrapHook(run))
                    clock = StepClock(sink)
                    train(config, clock, out, should_stop=sink.should_stop)
                    sink.close()
                times[kind].extend(clock.step_times())
    return {kind: statistics.median(values) for kind, values in times.items()}, times


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=2000, help="steps fed to the sink for rows/s")
    parser.add_argument("--keys", type=int, default=50, help="metric keys per step for rows/s")
    parser.add_argument("--train-steps", type=int, default=8, help="tiny-model steps per training")
    parser.add_argument("--rounds", type=int, default=4, help="alternating null/database trainings")
    parser.add_argument("--model", help="tiny model dir (default: build one in a temp dir)")
    args = parser.parse_args()

    owner, _ = get_user_model().objects.get_or_create(username="bench-worker")
    try:
        written, fed, total = bench_rows(owner, args.steps, args.keys)
        print(f"sink rows: {written} metric points ({args.steps} steps x {args.keys} keys, 4 samples/step)")
        print(
            f"  trainer side: {written / fed:,.0f} points/s; written to Postgres: {written / total:,.0f} "
            f"points/s ({total:.2f}s)"
        )

        with tempfile.TemporaryDirectory() as tmp:
            model_dir = args.model
            if model_dir is None:
                import torch

                from trainer import tiny_model

                torch.set_num_threads(1)
                model_dir = os.path.join(tmp, "tiny")
                tiny_model.build(model_dir, steps=10, dialogues=100, log=None)
            medians, times = bench_overhead(owner, model_dir, args.train_steps, args.rounds)
        ratio = medians["database"] / medians["null"]
        per_round = len(times["null"]) // args.rounds
        for round_ in range(args.rounds):
            part = slice(round_ * per_round, (round_ + 1) * per_round)
            print(
                f"  round {round_}: NullSink {statistics.median(times['null'][part]) * 1000:.1f} ms, "
                f"DatabaseSink {statistics.median(times['database'][part]) * 1000:.1f} ms"
            )
        print(
            f"step time, tiny model ({len(times['null'])} steps each): NullSink {medians['null'] * 1000:.1f} "
            f"ms, DatabaseSink+detector {medians['database'] * 1000:.1f} ms, ratio {ratio:.3f}"
        )
    finally:
        Experiment.objects.filter(owner=owner).delete()
        owner.delete()


if __name__ == "__main__":
    main()
