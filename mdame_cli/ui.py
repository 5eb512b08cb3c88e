"""`mdame ui`: `dagster dev` (webserver, daemon, code servers) in its own process group.

`mdame ui` used to exec `dagster dev`; a SIGTERM then reached only that process, and its
children (the webserver, the daemon, one code server per location, the runs they launched)
kept running after it exited. Now `dagster dev` leads a process group of its own, and every
stop signal this process gets is passed to the whole group; when `dagster dev` exits for any
reason, whatever is left of the group is terminated too (SIGKILL after a grace period).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
GRACE_S = 20.0


def dagster_dev_command(workspace: Path, port: int, host: str = "127.0.0.1") -> list[str]:
    dagster = Path(sys.executable).parent / "dagster"
    return [str(dagster), "dev", "-w", str(workspace), "-h", host, "-p", str(port)]


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signum)


def stop_group(pgid: int, grace_s: float = GRACE_S) -> None:
    """SIGTERM the group, then SIGKILL whatever is still there after `grace_s`."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while _group_alive(pgid) and time.monotonic() < deadline:
        time.sleep(0.2)
    _signal_group(pgid, signal.SIGKILL)


def run_in_own_group(
    command: Sequence[str], grace_s: float = GRACE_S, cwd: Path | None = None
) -> int:
    """Run `command` as the leader of a new process group; forward stop signals to the group
    and leave nothing of it behind. Returns the command's exit status (128+N if signalled).

    `dagster dev` does not always finish its own shutdown (it was seen waiting on its code
    servers for over a minute), so `grace_s` after the first stop signal the group is killed.
    """
    child = subprocess.Popen(list(command), start_new_session=True, cwd=cwd)
    pgid = child.pid
    stopping: list[float] = []

    def forward(signum: int, _frame: FrameType | None) -> None:
        stopping.append(time.monotonic())
        # SIGINT too becomes SIGTERM for the group: `dagster dev` shuts its children down on
        # either, and a second Ctrl-C from a terminal would otherwise interrupt that shutdown.
        _signal_group(pgid, signal.SIGTERM if signum == signal.SIGINT else signum)

    previous = {s: signal.signal(s, forward) for s in FORWARDED}
    try:
        while True:
            try:
                code = child.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if stopping and time.monotonic() - stopping[0] > grace_s:
                    _signal_group(pgid, signal.SIGKILL)
                    code = child.wait()
                    break
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        stop_group(pgid, grace_s)
    return code if code >= 0 else 128 - code


def ui_cwd() -> Path:
    """`dagster dev` warns that a dagster.yaml in its working folder "will not be used" unless
    that folder is DAGSTER_HOME; the repository's file is used, linked into DAGSTER_HOME. So
    it runs in DAGSTER_HOME (the workspace path is absolute; the code is an installed package)."""
    return Path(os.environ["DAGSTER_HOME"])


def run_ui(workspace: Path, port: int) -> int:
    return run_in_own_group(dagster_dev_command(workspace, port), cwd=ui_cwd())
