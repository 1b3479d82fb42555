"""A signal that asks the training loop to stop at the next step boundary, checkpointing first."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any


class StopSignal:
    """While entered, `signum` sets `asked` (pass `lambda: stop.asked` as the loop's should_stop) and calls
    `notice`; with abort_on_repeat a second one raises KeyboardInterrupt, for a user who will not wait for
    the step to end. Only the process's main thread can hold a signal handler; elsewhere this is inert."""

    def __init__(self, signum: int, notice: Callable[[], None] = lambda: None, abort_on_repeat: bool = False):
        self.signum, self.notice, self.abort_on_repeat = signum, notice, abort_on_repeat
        self.asked = False
        # What signal.signal() returned: the handler to put back (a callable, SIG_DFL/SIG_IGN, or None).
        self._previous: Callable[[int, FrameType | None], Any] | int | None = None

    def __enter__(self) -> StopSignal:
        if threading.current_thread() is threading.main_thread():
            self._previous = signal.signal(self.signum, self._ask)
        return self

    def _ask(self, signum, frame) -> None:
        if self.asked and self.abort_on_repeat:
            raise KeyboardInterrupt
        self.asked = True
        self.notice()

    def __exit__(self, *exc) -> None:
        if self._previous is not None:
            signal.signal(self.signum, self._previous)
