"""One training attempt of one run, inside a gpu worker's child process.

Postgres decides who trains, and what: a message makes a worker take the first run in the queue
(Run.next_in_queue), claimed with a conditional UPDATE (queued -> running), so a duplicated or stale
message does nothing and the broker's order of messages is not the queue's. torch and the trainer are
imported here, in the child, never in the worker's parent process (CUDA must not be initialised before
the fork).
"""

import collections
import contextlib
import logging
import os
import shutil
import signal
import socket
import tempfile
import traceback
from collections.abc import Callable

from django.conf import settings
from django.db.utils import Error as DatabaseError

from trainer.stopping import StopSignal  # torch-free
from webapp.experiments import run_planning
from webapp.experiments.models import Run
from worker.celery import stop_heard
from worker.sink import DatabaseSink, SinkFlushError
from worker.sweeper import pid_namespace, recover

logger = logging.getLogger(__name__)


def describe_device() -> str:
    """ "cuda:0 NVIDIA H100 (CUDA_VISIBLE_DEVICES=3)" or "cpu"."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    index = torch.cuda.current_device()
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    pinned = f" (CUDA_VISIBLE_DEVICES={visible})" if visible else ""
    return f"cuda:{index} {torch.cuda.get_device_name(index)}{pinned}"


def set_threads() -> None:
    if settings.TRAIN_THREADS:
        import torch

        torch.set_num_threads(settings.TRAIN_THREADS)


def make_hook(run):
    """The Echo Trap detector hook; without a usable detector the run trains undetected (logged)."""
    from worker.detection import EchoTrapHook

    try:
        return EchoTrapHook(run)
    except ImportError as error:
        logger.warning(
            "run %s: diagnostics not importable (%s); training without live detection", run.pk, error
        )
    except ValueError as error:
        logger.warning(
            "run %s: detector overrides rejected (%s); training without live detection", run.pk, error
        )
    return None


def shutdown_request() -> StopSignal:
    """SIGTERM while training (the worker, or `./echolab run`, is stopping) asks the loop to checkpoint at
    the next step boundary; the run is then requeued at once for the next worker, instead of waiting
    RUN_HEARTBEAT_TIMEOUT for the sweeper."""
    return StopSignal(
        signal.SIGTERM,
        notice=lambda: logger.info(
            "SIGTERM: checkpointing at the next step boundary, then requeuing the run"
        ),
    )


def outlive_the_forking_thread() -> Callable[[], bool]:
    """Celery arms PR_SET_PDEATHSIG (SIGKILL) in each pool child so that it dies with its worker, and Linux
    ties that signal to the *thread* that forked the child. A child forked to replace one that exited
    (--max-tasks-per-child 1: every run after a worker's first) comes from the pool's maintenance thread,
    which ends as a warm shutdown begins: such a run was SIGKILLed seconds into the step SIGTERM had asked
    it to finish, and left "running" without its last steps. Disarmed here; returns a check that the
    worker process is gone (the child then has a new parent), which training reads at each step boundary
    instead: an orphaned run checkpoints and goes back to the queue."""
    from billiard.util import set_pdeathsig

    parent = os.getppid()
    with contextlib.suppress(OSError):  # not Linux: nothing was armed
        set_pdeathsig(0)
    return lambda: os.getppid() != parent


def worker_is_stopping() -> bool:
    """In a pool child forked after its worker began shutting down: Celery sets these flags in the
    worker's process when it gets SIGTERM or SIGQUIT, and a fork copies them."""
    from celery.worker import state

    # A warm shutdown's flag is its exit code, often 0: compared by identity, as Celery does (0 == False).
    return any(flag is not None and flag is not False for flag in (state.should_stop, state.should_terminate))


def train_run(message_run_id: int) -> str:
    """A "train a run" message (sent for run `message_run_id`): claim the first run in the queue
    (Run.next_in_queue, which is that run unless the broker's order differs from the queue's) and train
    it; returns what happened, for the log."""
    worker_gone = outlive_the_forking_thread()
    # From here a SIGTERM is noted, not ignored: it is read before the claim and when training starts.
    signal.signal(signal.SIGTERM, lambda signum, frame: stop_heard.set())
    if worker_is_stopping() or stop_heard.is_set():
        # The pool forks a fresh child (one task per child) even during a warm shutdown and hands it the
        # task it had reserved; a claim now would load a model only to checkpoint it at the first step
        # boundary. Sent again, the message waits for the next worker.
        run = Run.next_in_queue()
        if run is not None:
            run.enqueue()
        return "worker shutting down: left queued"
    from trainer import tiny_model
    from trainer.config import TINY_MODEL, ConfigError, TrainConfig
    from trainer.models import one_line

    host, pid = socket.gethostname(), os.getpid()
    # Another worker may claim the first run between reading it and claiming it: then the next one.
    passed_over = set()
    while (run := Run.next_in_queue(passed_over)) is not None:
        passed_over.add(run.pk)
        # Validate before anything heavy: a config that no longer validates fails now, once, with its message.
        problem = why = None
        try:
            cfg = TrainConfig.from_dict(run.config)
            run_planning.resolve_model_fields(cfg)  # a config stored by other means is checked here too
        except ConfigError as error:
            problem, why = f"invalid config: {error}", "invalid config"
        else:
            if cfg.model.name == TINY_MODEL:
                # On a first start `./echolab run` builds it in the background: the run waits for that build
                # queued (the page says so), not as a run at step 0 building a second copy beside it.
                try:
                    tiny_model.ensure()
                except Exception as error:  # a MODEL_ROOT it cannot write, a full disk: said on the run
                    problem, why = f"building the tiny model failed: {one_line(error)}", "tiny model build"
        if problem is not None:
            if run.claim(host, pid, device="", pid_namespace=pid_namespace()):
                run.finish(Run.Status.FAILED, error=problem)
                return f"run {run.pk} failed: {why}"
            continue
        if stop_heard.is_set():  # heard while the tiny model was built
            run.enqueue()
            return "worker shutting down: left queued"
        if run.claim(host, pid, describe_device(), pid_namespace()):
            sent_for = (
                ""
                if run.pk == message_run_id
                else f" (first in the queue; the message named run {message_run_id})"
            )
            logger.info("run %s: attempt %s on %s (%s)%s", run.pk, run.attempt, host, run.device, sent_for)
            return f"run {run.pk}: {train_claimed(run, cfg, worker_gone)}"
    return "nothing to do: no run is queued"


@contextlib.contextmanager
def empty_working_directory():
    """The trainer loads a relative name that exists as a folder from the working directory; in an empty
    one, a hub id is always a hub id (local models arrive as absolute paths inside MODEL_ROOT)."""
    before = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="echolab-run-") as empty:
        os.chdir(empty)
        try:
            yield
        finally:
            os.chdir(before)


def train_claimed(run: Run, cfg, worker_gone: Callable[[], bool]) -> str:
    try:
        out_dir, resume, sink = prepare(run)
    except Exception as failure:  # a full disk, a checkpoint it cannot read: said on the run
        # A lost attempt, as the sweeper counts one: queued again (for a worker whose disk is not full, say)
        # until RUN_MAX_ATTEMPTS, not failed at once by the one broken worker that took it.
        error = f"{type(failure).__name__}: {failure}"
        logger.exception("run %s: could not start training", run.pk)
        counts = collections.Counter()
        recover(run, f"the worker on {socket.gethostname()} could not start it: {error}", counts)
        return f"not started ({error}): {dict(counts)}"
    # Held until the attempt is recorded: a second SIGTERM must not cut the flush or the requeue short.
    # A SIGTERM heard before (while the model loaded) counts as asked.
    with shutdown_request() as shutdown, empty_working_directory():
        shutdown.asked = shutdown.asked or stop_heard.is_set()
        return attempt(run, cfg, sink, out_dir, resume, lambda: shutdown.asked or worker_gone())


def prepare(run: Run) -> tuple[str, bool, DatabaseSink]:
    """What an attempt starts from: its checkpoint folder, whether it resumes, and its metrics sink."""
    set_threads()
    from transformers.utils import logging as transformers_logging

    # Celery logs a task's stderr line by line as WARNINGs: every redraw of a "Loading weights" bar was one.
    transformers_logging.disable_progress_bar()
    from trainer import checkpoint

    out_dir = str(run.checkpoint_dir)
    if run.attempt == 1:
        # A first attempt has no checkpoints of its own: whatever is there is from a reused run id.
        shutil.rmtree(out_dir, ignore_errors=True)
    # A checkpoint is written before the sink stores the steps it follows: one ahead of the stored steps
    # (the last attempt died in between) would resume past steps that no one stored.
    for ahead in checkpoint.drop_after(out_dir, run.step):
        logger.info("run %s: dropped checkpoint %s, ahead of the stored step %s", run.pk, ahead, run.step)
    found = checkpoint.latest(out_dir)
    if found is not None:
        logger.info("run %s: resuming from checkpoint %s", run.pk, found)
    return out_dir, found is not None, DatabaseSink(run, hook=make_hook(run))


def attempt(
    run: Run, cfg, sink: DatabaseSink, out_dir: str, resume: bool, leaving: Callable[[], bool]
) -> str:
    """Train the claimed run to its end, or to the step boundary where its owner stopped it or its worker
    is `leaving` (shutting down, or gone): then checkpointed and queued again for the next worker."""
    from trainer.loop import train
    from trainer.models import ModelLoadError, one_line

    status, error, trace = Run.Status.FAILED, "", ""
    try:
        outcome = train(
            cfg,
            sink,
            out_dir=out_dir,
            should_stop=lambda: leaving() or sink.should_stop(),
            resume=resume,
        )
        status = Run.Status.STOPPED if outcome == "stopped" else Run.Status.COMPLETED
    except (ModelLoadError, OSError) as failure:
        error, trace = one_line(failure), traceback.format_exc()
    except Exception as failure:
        error, trace = f"{type(failure).__name__}: {failure}", traceback.format_exc()
    try:
        sink.close()
    except SinkFlushError as failure:
        # Without its metrics the run is not done: leave it running; the sweeper retries it from the
        # last checkpoint once the heartbeat is stale.
        logger.error("run %s: %s", run.pk, failure)
        return "metrics not written; left for the sweeper"
    if sink.lost:
        return "lost the run to another attempt"
    if status == Run.Status.STOPPED and leaving():
        run.refresh_from_db()
        # requeue() refuses a run whose stop was requested meanwhile: that one is finished as stopped.
        if run.requeue(f"{Run.SHUT_DOWN}; checkpointed before step {run.step}"):
            run.enqueue()  # when the broker is away, the sweeper sends it later
            return f"worker shutting down: requeued at step {run.step}"
    finish_with_retries(run, status, error, trace)
    return status if not error else f"{status}: {error}"


def finish_with_retries(run: Run, status: str, error: str, trace: str, tries: int = 60) -> None:
    """finish() through a short database outage (the sink has just written everything)."""
    import time

    from django.db import connection

    for attempt in range(tries):
        try:
            run.finish(status, error=error, traceback=trace)
            return
        except DatabaseError as failure:
            if attempt == tries - 1:
                raise
            logger.warning("run %s: cannot record %s yet: %s", run.pk, status, failure)
            connection.close()
            time.sleep(1.0)
