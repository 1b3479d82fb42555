"""DatabaseSink: the trainer's Sink (trainer/sink.py) writing a run's metrics, samples and progress to
Postgres while it trains.

The trainer calls the sink from its loop and must never wait on the database, so the sink only buffers;
a flusher thread writes the buffer every `flush_interval` seconds and when a step ends (progress()).
Every write is idempotent (upserts on (run, key, step) and (run, step, index)), so after a database
error the buffer is simply kept, the connection closed, and the whole thing written again on the next
flush: a Postgres restart loses nothing. The same thread keeps the run's heartbeat, progress and
latest_metrics, and hands each finished step to the detection hook.

Every write is guarded by the attempt that claimed the run: once the sweeper has given the run to
another worker (this one looked dead), this sink writes nothing more and should_stop() turns true.
"""

import contextlib
import logging
import threading
import time

from django.db import close_old_connections, connection, transaction
from django.db.utils import Error as DatabaseError
from django.utils import timezone

from diagnostics.metrics import TIME_STEP_S
from trainer.sink import Eta
from webapp.core.jsonsafe import jsonb_safe
from webapp.experiments.models import Run
from webapp.metrics.models import MetricPoint, Sample, StepRecord

logger = logging.getLogger(__name__)


class SinkFlushError(RuntimeError):
    """The buffer could not be written before the deadline; the message says how much was pending."""


class DatabaseSink:
    def __init__(self, run: Run, hook=None, flush_interval: float = 2.0):
        self.run = run
        self.attempt = run.attempt
        self.hook = hook
        self.flush_interval = flush_interval
        self._lock = threading.Lock()  # guards the buffers below
        self._flush_lock = threading.Lock()  # one flush at a time (flusher thread or close())
        self._points: list[tuple[int, str, float]] = []
        self._samples: list[tuple[int, int, dict]] = []
        self._records: list[tuple[int, str, list]] = []
        self._steps: list[tuple[int, dict]] = []  # finished steps waiting for the hook
        self._latest = dict(run.latest_metrics)
        self._progress: tuple[int, int, float | None] | None = None
        self._eta = Eta()
        self.stop_requested = run.stop_requested
        self.lost = False  # another attempt owns the run now
        self._stored_step = run.step or 0  # the run's step as committed by this sink (or as it found it)
        self.last_error: Exception | None = None
        self._wake = threading.Event()
        self._closing = False
        self._thread = threading.Thread(target=self._run_flusher, name=f"run-{run.pk}-sink", daemon=True)
        self._thread.start()

    # ---- the Sink protocol (called by the trainer's loop) ----------------------------------------
    def metrics(self, step: int, values: dict[str, float]) -> None:
        points = [(step, key, None if value is None else float(value)) for key, value in values.items()]
        with self._lock:
            self._points.extend(points)
            self._latest.update({key: value for _, key, value in points})
            self._steps.append((step, dict(values)))

    def samples(self, step: int, samples: list[dict]) -> None:
        with self._lock:
            self._samples.extend((step, index, jsonb_safe(data)) for index, data in enumerate(samples))

    def records(self, step: int, key: str, values: list[float]) -> None:
        with self._lock:
            self._records.append((step, key, jsonb_safe(list(values))))

    def progress(self, step: int, total: int) -> None:
        # The first reported step took time/step_s; counted, the first ETA is not empty.
        eta = self._eta.update(step, total, time.monotonic(), float(self._latest.get(TIME_STEP_S) or 0.0))
        with self._lock:
            self._progress = (step, total, eta)
        self._wake.set()  # a step ended: flush now

    def stored_step(self) -> int:
        """The run's step as this sink last committed it: the steps before it have their points stored."""
        return self._stored_step

    def checkpoint(self, step: int, path: str) -> None:
        logger.info("run %s: checkpoint before step %s at %s", self.run.pk, step, path)

    # ---- for the worker ----------------------------------------------------------------------------
    def should_stop(self) -> bool:
        """Called by the trainer at each step boundary: one primary-key lookup."""
        if self.lost:
            return True
        try:
            flag = Run.objects.filter(pk=self.run.pk).values_list("stop_requested", flat=True).first()
        except DatabaseError as error:
            self._drop_connection(error)  # keep training on the last known answer
        else:
            self.stop_requested = bool(flag)
        return self.stop_requested or self.lost

    def pending(self) -> int:
        with self._lock:
            return len(self._points) + len(self._samples) + len(self._records) + len(self._steps)

    def close(self, timeout: float = 120.0) -> None:
        """Stop the flusher and write what is left, retrying through a database outage up to `timeout`."""
        self._closing = True
        self._wake.set()
        self._thread.join()
        deadline = time.monotonic() + timeout
        while not self.flush():
            if time.monotonic() > deadline:
                raise SinkFlushError(
                    f"{self.pending()} buffered rows of run {self.run.pk} could not be "
                    f"written in {timeout:.0f}s: {self.last_error}"
                )
            time.sleep(1.0)

    def flush(self) -> bool:
        """Write everything buffered; True when the buffer is empty afterwards (or the run was lost)."""
        with self._flush_lock:
            try:
                close_old_connections()
                # One transaction: the run's step is never seen ahead of the points of the steps it counts
                # (a worker killed between the two left a gap that its heir resumed past).
                with transaction.atomic():
                    step = self._write_heartbeat()
                    written = self._write_rows() if not self.lost else (0, 0, 0)
                self._forget(*written)  # committed: only now out of the buffer
                if step is not None and not self.lost:
                    self._stored_step = step
                if self.lost:
                    with self._lock:  # the run belongs to another attempt: its writes win
                        self._points, self._samples, self._records, self._steps = [], [], [], []
                    return True
                self._run_hook()
            except DatabaseError as error:
                self._drop_connection(error)
                return False
            return True

    # ---- internals ---------------------------------------------------------------------------------
    def _run_flusher(self):
        try:
            while not self._closing:
                self._wake.wait(self.flush_interval)
                self._wake.clear()
                if not self._closing:
                    self.flush()
        finally:
            connection.close()  # this thread's own connection

    def _write_heartbeat(self) -> int | None:
        """The heartbeat, progress and latest values; returns the step it wrote, if any."""
        step = None
        with self._lock:
            fields = {"heartbeat_at": timezone.now(), "latest_metrics": jsonb_safe(self._latest)}
            if self._progress is not None:
                step, total, eta = self._progress
                fields.update(step=step, total_steps=total, eta_seconds=eta)
        owned = Run.objects.filter(pk=self.run.pk, status=Run.Status.RUNNING, attempt=self.attempt)
        if owned.update(**fields) == 0 and not self.lost:
            self.lost = True
            logger.warning(
                "run %s: attempt %s no longer owns the run; writing nothing more", self.run.pk, self.attempt
            )
        return step

    def _write_rows(self):
        with self._lock:
            points, samples, records = list(self._points), list(self._samples), list(self._records)
        if points:
            MetricPoint.upsert(self.run.pk, points)
        run = self.run.pk
        _replace(
            Sample,
            [Sample(run_id=run, step=step, index=index, data=data) for step, index, data in samples],
            unique=["run", "step", "index"],
            update=["data"],
        )
        _replace(
            StepRecord,
            [StepRecord(run_id=run, step=step, key=key, values=values) for step, key, values in records],
            unique=["run", "key", "step"],
            update=["values"],
        )
        return len(points), len(samples), len(records)

    def _forget(self, points: int, samples: int, records: int) -> None:
        """Drop written rows from the buffer: only those; more may have arrived meanwhile."""
        with self._lock:
            del self._points[:points]
            del self._samples[:samples]
            del self._records[:records]

    def _run_hook(self):
        while True:
            with self._lock:
                if not self._steps:
                    return
                step, values = self._steps[0]
            if self.hook is not None:
                try:
                    self.hook.on_step(self.run, step, values)
                except DatabaseError:
                    raise
                except Exception:  # a detector bug must not stop the training
                    logger.exception(
                        "run %s: detection hook failed at step %s; detection is off", self.run.pk, step
                    )
                    self.hook = None
            with self._lock:
                self._steps.pop(0)

    def _drop_connection(self, error):
        if self.last_error is None or str(error) != str(self.last_error):
            first_line = (str(error).strip().splitlines() or [type(error).__name__])[0]
            logger.warning(
                "run %s: database unavailable, keeping %s buffered rows: %s",
                self.run.pk,
                self.pending(),
                first_line,
            )
        self.last_error = error
        with contextlib.suppress(DatabaseError):
            connection.close()


def _replace(model, rows: list, unique: list[str], update: list[str]) -> None:
    """Insert rows; one whose `unique` fields match a stored row (a step its earlier attempt wrote) updates
    that row's `update` fields instead."""
    if rows:
        model.objects.bulk_create(
            rows, batch_size=500, update_conflicts=True, unique_fields=unique, update_fields=update
        )
