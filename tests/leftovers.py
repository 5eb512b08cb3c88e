"""Processes the suite started that are still alive when it ends.

A code server that Dagster's workspace starts (`dagster api grpc --heartbeat`) stops only once
the runs it started have ended, and a process started while a pytest worker had SIGTERM set to
SIG_IGN inherits that and ignores SIGTERM: such a server once outlived the suite by an hour.

Each pytest process tags the environment its children inherit (TAG_VAR; not an MDAME_
variable, which tests/childenv.py strips), and at the session's end looks for processes
carrying its tag or descending from it: the tag finds orphans whose parent is gone (a code
server of a killed `dagster dev`), the process tree those started with an environment of their
own. Those found are sent SIGTERM, then SIGKILL after GRACE_S, and reported.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
import uuid
from pathlib import Path

TAG_VAR = "MDAMETEST_SUITE_TAG"
GRACE_S = 5.0


def tag_this_process() -> str:
    """A fresh tag for what this process starts from now on."""
    tag = f"{os.getpid()}-{uuid.uuid4().hex[:12]}"
    os.environ[TAG_VAR] = tag
    return tag


def _children(pid: int) -> set[int]:
    found: set[int] = set()
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return found
    for task in tasks:
        try:
            found.update(int(c) for c in (task / "children").read_text().split())
        except (OSError, ValueError):
            continue
    return found


def descendants(pid: int) -> set[int]:
    seen: set[int] = set()
    todo = [pid]
    while todo:
        for child in _children(todo.pop()) - seen:
            seen.add(child)
            todo.append(child)
    return seen


def _tagged(tag: str) -> set[int]:
    needle = f"{TAG_VAR}={tag}".encode()
    found: set[int] = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle in (entry / "environ").read_bytes().split(b"\0"):
                found.add(int(entry.name))
        except OSError:  # gone, or another user's
            continue
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"  # a zombie has ended; its parent has yet to reap it


def describe(pid: int) -> str:
    try:
        cmd = (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        cmd = "?"
    return f"pid {pid}: {cmd.strip()[:300]}"


def stop_multiprocessing_helpers() -> None:
    """This process's own multiprocessing forkserver and resource tracker (a test that used a
    forkserver context starts them once, for the process's life) are stopped as the process
    would stop them at exit: they are its machinery, not something a test left behind."""
    from multiprocessing import forkserver, resource_tracker

    for helper in (forkserver._forkserver, resource_tracker._resource_tracker):
        with contextlib.suppress(Exception):
            helper._stop()  # type: ignore[union-attr]


def leftovers(tag: str) -> set[int]:
    stop_multiprocessing_helpers()
    me = os.getpid()
    return {pid for pid in (_tagged(tag) | descendants(me)) if pid != me and _alive(pid)}


def stop(pids: set[int], grace_s: float = GRACE_S) -> list[str]:
    """SIGTERM, then SIGKILL for those still alive after `grace_s`; their descriptions."""
    described = [describe(pid) for pid in sorted(pids)]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in pids:
        if _alive(pid):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    return described
