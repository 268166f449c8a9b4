"""Stop signals that wait for the end of a training step.

A SIGTERM (a scheduler preempting the job), a SIGINT (Ctrl-C) or submitit's preemption signal
(``SIGUSR2`` unless ``$SUBMITIT_PREEMPT_SIGNAL`` names another) arriving in the middle of a step
would leave weights and optimizer state half-updated. While training, these signals are only
recorded; the loop reads the record at the end of the step, saves a checkpoint and stops. A
second signal of the same kind acts at once (an impatient Ctrl-C), from the last checkpoint.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType
from typing import Any

from posenc.core.errors import Interrupted


def _preempt_signal() -> signal.Signals | None:
    name = os.environ.get("SUBMITIT_PREEMPT_SIGNAL", "USR2")
    return getattr(signal, f"SIG{name}", None) or getattr(signal, name, None)


class StopRequest:
    """Which stop signal arrived (``signum``, None when none) and who handled it before us."""

    def __init__(self, run_dir: object = None) -> None:
        self.signum: int | None = None
        self.previous: dict[int, Any] = {}
        self.run_dir = run_dir
        self.delivered = False

    def __call__(self) -> bool:
        return self.signum is not None

    def _record(self, signum: int, frame: FrameType | None) -> None:
        if self.signum == signum:  # asked twice: stop now
            raise Interrupted(signum, None, self.run_dir)
        self.signum = signum

    def deliver(self, step: int) -> None:
        """After the checkpoint: raise ``Interrupted``, unless a Python handler was there before
        us; then that handler decides (submitit's requeues the job and exits on its preemption
        signal, and lets SIGTERM pass), and training goes on if it returns."""
        previous = self.previous.get(self.signum)
        if callable(previous) and previous not in (signal.default_int_handler, _interrupt):
            signum, self.signum = self.signum, None
            previous(signum, None)
            return
        self.delivered = True
        raise Interrupted(self.signum, step, self.run_dir)


@contextmanager
def deferred_stop_signals(run_dir: object = None) -> Iterator[StopRequest]:
    """Defer SIGTERM, SIGINT and (inside a submitit job) its preemption signal to step ends.

    Yields a ``StopRequest`` (true once a signal arrived). Outside the main thread signals
    cannot be caught, so nothing is installed and the request stays false.
    """
    request = StopRequest(run_dir)
    if threading.current_thread() is not threading.main_thread():
        yield request
        return
    wanted = [signal.SIGTERM, signal.SIGINT]
    preempt = _preempt_signal()
    if preempt is not None and callable(signal.getsignal(preempt)):  # someone (submitit) listens
        wanted.append(preempt)
    for signum in wanted:
        handler = signal.getsignal(signum)
        if handler is signal.SIG_IGN:
            continue
        request.previous[signum] = handler
        signal.signal(signum, request._record)
    try:
        yield request
    finally:
        for signum, handler in request.previous.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
    if request.signum is not None and not request.delivered:  # came after the last step: resend it
        signal.raise_signal(request.signum)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(signal.Signals(signum).name)


@contextmanager
def sigterm_unwinds() -> Iterator[None]:
    """While a launcher runs jobs in worker processes, SIGTERM raises ``KeyboardInterrupt('SIGTERM')``.

    Left to its default, SIGTERM ends the launching process at once, without unwinding, and a
    pool's workers (joblib's loky processes) outlive it, training on until their job ends. Raised
    as an exception, it unwinds through joblib, which terminates its workers. A run training in
    this process defers it to its step end as before (``deferred_stop_signals`` hands the signal to
    this handler after its checkpoint). Installed only over the default handler, in the main thread.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
