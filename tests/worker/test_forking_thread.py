"""Celery's pool children are armed with a parent-death SIGKILL, which Linux ties to the thread that forked
them: a child forked by a thread that then ends is killed. On the filesystem broker `./echolab run` uses,
the pool's maintenance thread forks every replacement child (one task per child: every run after a
worker's first), and it ends as a warm shutdown begins: a tester's run was killed 4 s into the step it
had been asked to finish, and left "running". A training child disarms it (outlive_the_forking_thread)."""

import multiprocessing
import signal
import sys
import threading
import time

import pytest

from worker.training import outlive_the_forking_thread

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")


def child(armed, disarm):
    from billiard.util import set_pdeathsig

    set_pdeathsig(signal.SIGKILL)  # as celery.concurrency.prefork.process_initializer does
    worker_gone = outlive_the_forking_thread() if disarm else (lambda: False)
    armed.send(worker_gone())
    time.sleep(1.5)  # the forking thread ends meanwhile
    sys.exit(0)


def forked_by_a_thread_that_ends(disarm: bool):
    """(the child's exit code, whether it thought its worker gone while the worker process lived)"""
    context = multiprocessing.get_context("fork")
    reader, writer = context.Pipe(duplex=False)
    started = {}

    def fork():  # as billiard's pool maintenance thread does, then returns
        started["process"] = context.Process(target=child, args=(writer, disarm))
        started["process"].start()
        started["gone"] = reader.recv()  # armed before the thread ends: no race

    thread = threading.Thread(target=fork)
    thread.start()
    thread.join()
    process = started["process"]
    process.join(timeout=10)
    return process.exitcode, started["gone"]


def test_a_child_forked_by_a_thread_that_ends_is_killed_unless_it_disarms_the_signal():
    assert forked_by_a_thread_that_ends(disarm=False)[0] == -signal.SIGKILL  # the mechanism itself
    assert forked_by_a_thread_that_ends(disarm=True) == (0, False)
