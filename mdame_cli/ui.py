"""`mdame ui`: `dagster dev` (webserver, daemon, code servers) in its own process group.

`mdame ui` used to exec `dagster dev`; a SIGTERM then reached only that process, and its
children (the webserver, the daemon, one code server per location, the runs they launched)
kept running after it exited. Now `dagster dev` leads a process group of its own, and every
stop signal this process gets is passed to the whole group; when `dagster dev` exits for any
reason, whatever is left of the group is terminated too (SIGKILL after a grace period).

The group also holds a run server per code location (`mdame run-server`, on the Unix sockets
$MDAME_HOME/run/LOCATION.sock, named in MDAME_RUN_SERVERS), so the daemon's runs are forked warm
rather than spawned (docs/deployment.md: Warm run workers).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from mdame_core import settings

FORWARDED = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
GRACE_S = 20.0
RESTART_S = 5.0


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
    command: Sequence[str],
    grace_s: float = GRACE_S,
    cwd: Path | None = None,
    companions: Sequence[Sequence[str]] = (),
) -> int:
    """Run `command` as the leader of a new process group; forward stop signals to the group
    and leave nothing of it behind. Returns the command's exit status (128+N if signalled).

    `companions` run in the same group for as long as `command` runs, each started again when
    it exits (a run server exits when the code under it changes).

    `dagster dev` does not always finish its own shutdown (it was seen waiting on its code
    servers for over a minute), so `grace_s` after the first stop signal the group is killed.
    """
    # A group of its own in this session: its companions may join it (setpgid stays within a
    # session), and a terminal's Ctrl-C still reaches only this process, which forwards it.
    child = subprocess.Popen(list(command), process_group=0, cwd=cwd)
    pgid = child.pid
    stopping: list[float] = []

    started: dict[int, float] = {}

    def start(i: int) -> subprocess.Popen:
        started[i] = time.monotonic()
        return subprocess.Popen(list(companions[i]), process_group=pgid, cwd=cwd)

    running = {i: start(i) for i in range(len(companions))}

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
                for i, proc in running.items():
                    # Not more often than every RESTART_S: one that cannot start (its database
                    # is down) would otherwise load its definitions twice a second.
                    due = time.monotonic() - started[i] >= RESTART_S
                    if not stopping and due and proc.poll() is not None:
                        running[i] = start(i)
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
    return Path(settings.raw("DAGSTER_HOME"))


def run_server_commands() -> list[list[str]]:
    """A run server per code location on its default socket ($MDAME_HOME/run/LOCATION.sock),
    named to the daemon and the webserver in MDAME_RUN_SERVERS; none when the operator set
    MDAME_RUN_SERVERS (empty: no run servers), or when MDAME_HOME is too deep for a socket's
    path (then the code servers spawn the runs, as this says)."""
    from mdame_runtime.run_launcher import SERVERS_ENV
    from mdame_runtime.run_server import LOCATION_MODULES, default_socket

    if SERVERS_ENV in settings.environment():  # set, even empty (no run servers)
        return []
    try:
        sockets = {location: default_socket(location) for location in LOCATION_MODULES}
    except ValueError as exc:
        print(f"mdame ui: no run servers, the code servers spawn every run: {exc}", file=sys.stderr)
        return []
    mdame = str(Path(sys.executable).parent / "mdame")
    settings.set_variable(SERVERS_ENV, ",".join(f"{loc}={path}" for loc, path in sockets.items()))
    return [
        [mdame, "run-server", "--location", location, "--socket", path]
        for location, path in sockets.items()
    ]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run_ui(workspace: Path, port: int) -> int:
    """`dagster dev` and the locations' run servers, one process group."""
    return run_in_own_group(
        dagster_dev_command(workspace, port), cwd=ui_cwd(), companions=run_server_commands()
    )
