"""The crash hook of the crash harness: a commit observer (mdame_core.state.set_commit_observer)
that SIGKILLs this process at a chosen commit boundary, and traces every committed RPC.

    MDAME_CRASH_AT=<rpc>:<n>:<before|after>   SIGKILL just before the n-th committed call of
                                              `rpc` is sent, or just after its result came back
    MDAME_RPC_TRACE=<file>                    one line per committed RPC, flushed (survives a kill)

Only test processes install it (`install_from_env`, called by the harness's child); it is refused
when ENV=prod, where nothing may kill the pipeline.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
import threading
from dataclasses import dataclass
from typing import TextIO

from mdame_core.settings import SettingsError
from mdame_core.state import set_commit_observer

CRASH_ENV = "MDAME_CRASH_AT"
TRACE_ENV = "MDAME_RPC_TRACE"
PHASES = ("before", "after")
_RPC_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")


@dataclass(frozen=True)
class CrashPoint:
    """`<rpc>:<n>:<before|after>`: SIGKILL this process just before the n-th committed call of
    `rpc` is sent, or just after it committed (n counts committed calls, from 1)."""

    rpc: str
    n: int
    phase: str

    @classmethod
    def parse(cls, spec: str) -> CrashPoint:
        parts = spec.strip().split(":")
        if (
            len(parts) != 3
            or not _RPC_NAME.match(parts[0])
            or not parts[1].isdigit()
            or int(parts[1]) < 1
            or parts[2] not in PHASES
        ):
            raise SettingsError(
                f"{CRASH_ENV}={spec!r} is malformed: expected <rpc>:<n>:<before|after> with n >= 1,"
                " for example transition:3:after"
            )
        return cls(parts[0], int(parts[1]), parts[2])

    def __str__(self) -> str:
        return f"{self.rpc}:{self.n}:{self.phase}"


class CrashObserver:
    """Counts committed calls per RPC (what a crash point's n counts), writes the trace, kills."""

    def __init__(self, crash: CrashPoint | None, trace_path: str = "") -> None:
        self.crash = crash
        self._lock = threading.Lock()
        self._counts: dict[str, int] = {}
        self._trace: TextIO | None = None
        self._trace_path = trace_path

    def __call__(self, rpc: str, phase: str) -> None:
        crash = self.crash
        if phase == "before":
            # A refused call never reaches "after", so it is not counted: a "before" point is
            # the moment the n-th commit of `rpc` would be sent.
            if (
                crash
                and (crash.phase, crash.rpc) == ("before", rpc)
                and self.count(rpc) == crash.n - 1
            ):
                _sigkill_self(crash)
            return
        n = self._record(rpc)
        if crash and crash.phase == "after" and crash.rpc == rpc and n == crash.n:
            _sigkill_self(crash)

    def count(self, rpc: str) -> int:
        with self._lock:
            return self._counts.get(rpc, 0)

    def _record(self, rpc: str) -> int:
        with self._lock:
            n = self._counts[rpc] = self._counts.get(rpc, 0) + 1
            if self._trace_path:
                if self._trace is None:
                    self._trace = open(self._trace_path, "a", encoding="utf-8")  # noqa: SIM115
                self._trace.write(rpc + "\n")
                self._trace.flush()
            return n


def install_from_env() -> CrashObserver | None:
    """Installs the observer MDAME_CRASH_AT / MDAME_RPC_TRACE ask for (None: neither is set).
    Refused when ENV=prod."""
    spec = os.environ.get(CRASH_ENV, "")
    trace = os.environ.get(TRACE_ENV, "")
    if not spec and not trace:
        return None
    if os.environ.get("ENV") == "prod":
        raise SettingsError(f"{CRASH_ENV} is a test-only fault injection and is refused in prod")
    observer = CrashObserver(CrashPoint.parse(spec) if spec else None, trace)
    set_commit_observer(observer)
    return observer


def _sigkill_self(crash: CrashPoint) -> None:
    with contextlib.suppress(OSError, ValueError):
        sys.stderr.write(f"mdame: {CRASH_ENV}={crash}: SIGKILL\n")
        sys.stderr.flush()
    os.kill(os.getpid(), signal.SIGKILL)
