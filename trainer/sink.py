"""Where the loop's output goes. JsonlSink: OUT/config.yaml, OUT/metrics.jsonl, OUT/samples.jsonl,
OUT/records.jsonl."""

from __future__ import annotations

import collections
import json
import math
import os
import sys
import time
from typing import Protocol

from diagnostics.metrics import TIME_STEP_S, TRAIN_REWARD_MEAN, TRAIN_SUCCESS, VAL_SUCCESS


class Sink(Protocol):
    def metrics(self, step: int, values: dict[str, float]) -> None: ...
    def samples(self, step: int, samples: list[dict]) -> None: ...
    def records(self, step: int, key: str, values: list[float]) -> None: ...
    def progress(self, step: int, total: int) -> None: ...
    def checkpoint(self, step: int, path: str) -> None: ...
    def stored_step(self) -> int | None:
        """How many steps' output is stored for good (a sink that writes in the background may be behind
        the loop); None when every step handed over is. The checkpoint to resume from is kept by it."""
        ...


class Eta:
    """Seconds left, at the pace of the run's later half so far, or of its last WINDOW steps while it is
    short. The first steps of a run are slow (the first validation, long replies before the model learns
    to answer briefly): at the pace since the start, a tester's 60-step run said "ETA 2h 02m" at step 2 and
    ended 25 minutes later. A fixed window of the last steps sees a validation every 25 steps in some
    steps and not in others, and the ETA jumped by half at each; half the run takes them in at their rate.
    The window's start is one of at most about 2 x MARKS marks, spaced ever wider as the run goes on (a
    mark a step held 60 MB after a million steps)."""

    WINDOW = 10
    MARKS = 256

    def __init__(self):
        self._marks: collections.deque[tuple[int, float]] = collections.deque()

    def update(self, step: int, total: int, now: float, first_step_seconds: float) -> float | None:
        if not self._marks:
            self._marks.append((step - 1, now - first_step_seconds))
            self._start = step - 1
        done = step - self._start
        if step - self._marks[-1][0] >= max(1, done // self.MARKS):
            self._marks.append((step, now))
        span = max(self.WINDOW, done // 2)
        while len(self._marks) > 2 and step - self._marks[1][0] >= span:
            self._marks.popleft()
        since_step, since = self._marks[0]
        return (now - since) / (step - since_step) * (total - step) if step > since_step else None


class NullSink:
    def metrics(self, step, values):
        pass

    def samples(self, step, samples):
        pass

    def records(self, step, key, values):
        pass

    def progress(self, step, total):
        pass

    def checkpoint(self, step, path):
        pass

    def stored_step(self):
        return None  # written as handed over


class MemorySink(NullSink):
    """Keeps everything in lists (tests, notebooks)."""

    def __init__(self):
        self.rows: list[dict] = []
        self.sample_rows: list[tuple[int, list[dict]]] = []
        self.record_rows: list[tuple[int, str, list[float]]] = []
        self.checkpoints: list[tuple[int, str]] = []

    def metrics(self, step, values):
        self.rows.append({"step": step, **values})

    def samples(self, step, samples):
        self.sample_rows.append((step, samples))

    def records(self, step, key, values):
        self.record_rows.append((step, key, list(values)))

    def checkpoint(self, step, path):
        self.checkpoints.append((step, path))


def _clean(value):
    """JSON has no NaN or infinity: such a value is written as null."""
    return None if isinstance(value, float) and not math.isfinite(value) else value


class JsonlSink:
    """JSON lines; a step logged again (after a resume) replaces the lines from that step on."""

    def __init__(self, out_dir: str, config_yaml: str | None = None, stream=sys.stderr):
        self.out_dir, self.stream = out_dir, stream
        os.makedirs(out_dir, exist_ok=True)
        if config_yaml is not None:
            with open(os.path.join(out_dir, "config.yaml"), "w") as f:
                f.write(config_yaml)
        self.metrics_path = os.path.join(out_dir, "metrics.jsonl")
        self.samples_path = os.path.join(out_dir, "samples.jsonl")
        self.records_path = os.path.join(out_dir, "records.jsonl")
        self.last: dict = {}
        self._last_step: dict[str, int] = {}
        self.eta = Eta()

    def _append(self, path: str, step: int, rows: list[dict]) -> None:
        if step <= self._last_step.get(path, -1) or (path not in self._last_step and os.path.exists(path)):
            with open(path) as f:  # a resumed run logs steps again: drop the old lines from `step` on
                kept = [line for line in f if line.strip() and json.loads(line)["step"] < step]
            with open(path, "w") as f:
                f.writelines(kept)
        self._last_step[path] = step
        with open(path, "a") as f:
            for row in rows:
                f.write(json.dumps({key: _clean(value) for key, value in row.items()}) + "\n")

    def metrics(self, step, values):
        self.last = values
        self._append(self.metrics_path, step, [{"step": step, **values}])

    def samples(self, step, samples):
        self._append(self.samples_path, step, [{"step": step, **s} for s in samples])

    def records(self, step, key, values):
        self._append(
            self.records_path, step, [{"step": step, "key": key, "values": [_clean(v) for v in values]}]
        )

    def progress(self, step, total):
        eta = self.eta.update(step, total, time.time(), self.last.get(TIME_STEP_S, 0.0)) or 0.0
        last = self.last
        val = f" | val {last[VAL_SUCCESS]:.2f}" if VAL_SUCCESS in last else ""
        print(
            f"step {step}/{total} | eta {int(eta) // 60}m{int(eta) % 60:02d}s | success "
            f"{last.get(TRAIN_SUCCESS, float('nan')):.2f} | reward {last.get(TRAIN_REWARD_MEAN, float('nan')):.3f}"
            f"{val}",
            file=self.stream,
            flush=True,
        )

    def checkpoint(self, step, path):
        print(f"checkpoint at step {step}: {path}", file=self.stream, flush=True)

    def stored_step(self):
        return None  # each line written as handed over
