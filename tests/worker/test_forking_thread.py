"""Celery's pool children are armed with a parent-death SIGKILL, which Linux ties to the thread that forked
them: a child forked by a thread that then ends is killed. On the filesystem broker `./echolab run` uses,
the pool's maintenance thread forks every replacement child (one task per child: every run after a
worker's first), and it ends as a warm shutdown begins: a tester's run was killed 4 s into the step it
had been asked to finish, and left "running". A training child disarms it (outlive_the_forking_thread)."""

import os
import select
import signal
import sys
import threading
import time

import pytest
from billiard.util import set_pdeathsig

from worker.training import outlive_the_forking_thread

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")


def child(writer: int, disarm: bool) -> None:
    set_pdeathsig(signal.SIGKILL)  # as celery.concurrency.prefork.process_initializer does
    worker_gone = outlive_the_forking_thread() if disarm else (lambda: False)
    os.write(writer, b"1" if worker_gone() else b"0")
    time.sleep(1.5)  # the forking thread ends meanwhile


def forked_by_a_thread_that_ends(disarm: bool):
    """(the child's exit code, whether it thought its worker gone while the worker process lived).
    A bare os.fork, not multiprocessing: its child's start-up (closing stdin, flushing stdout) takes
    locks that the test process's other threads (pytest-xdist's) may hold at the fork, and once hung
    CI for 10 minutes."""
    reader, writer = os.pipe()
    forked = {}

    def fork():  # as billiard's pool maintenance thread does, then returns
        pid = os.fork()
        if pid == 0:
            exit_code = 1
            try:
                child(writer, disarm)
                exit_code = 0
            finally:
                os._exit(exit_code)
        forked["pid"] = pid
        armed, _, _ = select.select([reader], [], [], 30)  # armed before the thread ends: no race
        forked["gone"] = os.read(reader, 1) == b"1" if armed else "never armed"

    thread = threading.Thread(target=fork)
    thread.start()
    thread.join()
    os.close(reader)
    os.close(writer)
    return wait_for_exit(forked["pid"]), forked["gone"]


def wait_for_exit(pid: int, seconds: float = 15) -> int:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    pytest.fail(f"the forked child was still alive after {seconds} s")


def test_a_child_forked_by_a_thread_that_ends_is_killed_unless_it_disarms_the_signal():
    assert forked_by_a_thread_that_ends(disarm=False)[0] == -signal.SIGKILL  # the mechanism itself
    assert forked_by_a_thread_that_ends(disarm=True) == (0, False)
