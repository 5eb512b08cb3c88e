"""SIGTERM and Ctrl-C that stop an in-process Dagster run, even while it waits on a pool slot.

Why they were ignored: `execute_in_process` wraps the whole run in Dagster's
`capture_interrupts()`, which replaces the SIGINT handler (and maps SIGTERM to it) with one
that only sets a flag. Inside a step's compute `raise_execution_interrupts()` turns the signal
into `DagsterExecutionInterruptedError`, but the in-process executor's main loop
(`execute_plan_iterator`: get_next_step / sleep_til_ready while a step waits for a pool slot)
never reads that flag (only the multiprocess executor polls `check_for_interrupts`). So a run
queued behind a slot held by a dead run swallowed every SIGTERM and SIGINT.

`stop_on_signals()` makes them work: its own handlers raise `Interrupted` outside Dagster's
runs; a wakeup fd lets a watcher thread see each signal even while Dagster's flag-only handler
is installed, and when the flag is still unread a moment later (the run is in an
uninterruptible wait) it sends SIGUSR1 to the main thread, whose handler raises
`DagsterExecutionInterruptedError` there. Dagster then fails the run ("Execution was
interrupted unexpectedly") and frees its pool claims, as it does for an interrupted step.
Callers check `stop_requested()` between runs.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

from dagster._core.errors import DagsterExecutionInterruptedError
from dagster._utils.interrupts import check_captured_interrupt

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
KICK_SIGNAL = signal.SIGUSR1
# How long Dagster gets to act on a signal itself (a step's compute raises at once).
KICK_AFTER_S = 0.3

_stop = threading.Event()
_stop_signal: list[int] = []


class Interrupted(KeyboardInterrupt):
    """A stop signal arrived; the process should wind down and exit."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def stop_requested() -> bool:
    return _stop.is_set()


def stop_signal_name() -> str:
    return signal.Signals(_stop_signal[0]).name if _stop_signal else "SIGTERM"


def stop_exit_code() -> int:
    """The shell's convention for a process ended by a signal: 128 + its number."""
    return 128 + (_stop_signal[0] if _stop_signal else signal.SIGTERM)


def raise_if_stopping() -> None:
    if _stop.is_set():
        raise Interrupted(_stop_signal[0] if _stop_signal else signal.SIGTERM)


def _on_stop(signum: int, _frame: FrameType | None) -> None:
    _stop_signal.append(signum)
    _stop.set()
    raise Interrupted(signum)


def _on_kick(_signum: int, _frame: FrameType | None) -> None:
    if check_captured_interrupt():  # still inside Dagster's uninterruptible wait
        raise DagsterExecutionInterruptedError("stopped by signal while waiting")


def _watch(read_fd: int, main_thread_id: int, closing: threading.Event) -> None:
    while not closing.is_set():
        try:
            data = os.read(read_fd, 64)
        except OSError:
            return
        if not data:
            return
        for signum in data:
            if signum not in STOP_SIGNALS:
                continue
            if not _stop.is_set():
                _stop_signal.append(signum)
                _stop.set()
            if closing.wait(KICK_AFTER_S):
                return
            if check_captured_interrupt():
                signal.pthread_kill(main_thread_id, KICK_SIGNAL)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """Within this block SIGTERM and SIGINT stop the process's work promptly (main thread)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    _stop.clear()
    _stop_signal.clear()
    previous = {s: signal.getsignal(s) for s in (*STOP_SIGNALS, KICK_SIGNAL)}
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    closing = threading.Event()
    old_wakeup = signal.set_wakeup_fd(write_fd, warn_on_full_buffer=False)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _on_stop)
    signal.signal(KICK_SIGNAL, _on_kick)
    watcher = threading.Thread(
        target=_watch,
        args=(read_fd, threading.main_thread().ident, closing),
        name="stop-signal-watcher",
        daemon=True,
    )
    watcher.start()
    try:
        yield
    finally:
        closing.set()
        signal.set_wakeup_fd(old_wakeup)
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        os.close(write_fd)  # ends the watcher's read
        watcher.join(timeout=2)
        os.close(read_fd)
