"""Scratch files of the pipeline's steps: owned, cleaned, swept.

Layout: <scratch root>/<step name>/<owner>/..., where <owner> is `<host>~<pid>~<start>`: the
host, the process id and the process's start time (Linux /proc, so a recycled pid is not
mistaken for its dead predecessor). A step writes only under its own process's folder, cleans
what it made on success and failure (`scratch_space`), and whatever a killed process left is
removed by the next sweep (`sweep_scratch`, run when a step first asks for scratch space and by
the daily housekeeping):

- a folder of this host whose process is gone: removed at once;
- a folder of another host (a shared home): removed once untouched for `max_age_s`, as the
  pid cannot be checked from here;
- anything else (files of the layout before this one): removed once untouched for
  `max_age_s`.
A live process's folder is never removed.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

DEFAULT_MAX_AGE_S = 6 * 3600.0
_OWNER = re.compile(r"^(?P<host>[A-Za-z0-9._-]{1,64})~(?P<pid>[0-9]{1,10})~(?P<start>[0-9]{1,20})$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]")


def _host() -> str:
    return _UNSAFE.sub("_", socket.gethostname())[:64] or "host"


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), None when there is no such
    process; 0 where /proc is not there (then only the pid is compared). A zombie (killed, not
    yet reaped) counts as gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            pass
        return 0
    except OSError:
        return None
    # Fields after the parenthesised command name: state is the 1st, starttime the 20th.
    fields = stat.rsplit(")", 1)[-1].split()
    if len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19])


def owner_name(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{_host()}~{pid}~{process_start(pid) or 0}"


def owned_dir(root: Path, name: str) -> Path:
    """This process's folder for step `name` (made if missing)."""
    if not re.match(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$", name):
        raise ValueError(f"scratch name must be letters, digits, '.', '_' or '-': {name!r}")
    path = Path(root) / name / owner_name()
    path.mkdir(parents=True, exist_ok=True)
    return path


@contextlib.contextmanager
def scratch_space(root: Path, name: str) -> Iterator[Path]:
    """A fresh folder under this process's scratch for step `name`, removed on the way out
    whatever happens (a SIGKILL leaves it to the next sweep)."""
    path = Path(tempfile.mkdtemp(prefix="use-", dir=owned_dir(root, name)))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def _alive(host: str, pid: int, start: int) -> bool | None:
    """Whether the owner runs; None when it cannot be told from here (another host)."""
    if host != _host():
        return None
    actual = process_start(pid)
    if actual is None:
        return False
    return start == 0 or actual == 0 or actual == start


def _age_s(path: Path, now: float) -> float:
    """Seconds since anything under `path` last changed (its newest mtime)."""
    newest = path.lstat().st_mtime
    if path.is_dir() and not path.is_symlink():
        for folder, dirs, files in os.walk(path):
            for entry in (*dirs, *files):
                with contextlib.suppress(OSError):
                    newest = max(newest, (Path(folder) / entry).lstat().st_mtime)
    return now - newest


def _remove(path: Path) -> int:
    """Removes a file or folder; the bytes it held."""
    size = 0
    try:
        if path.is_dir() and not path.is_symlink():
            for folder, _, files in os.walk(path):
                for entry in files:
                    with contextlib.suppress(OSError):
                        size += (Path(folder) / entry).lstat().st_size
            shutil.rmtree(path, ignore_errors=True)
        else:
            size = path.lstat().st_size
            path.unlink(missing_ok=True)
    except OSError:
        return 0
    return size


def sweep_scratch(
    root: Path, max_age_s: float = DEFAULT_MAX_AGE_S, now: float | None = None
) -> tuple[list[Path], int]:
    """Removes the leftovers of processes that are gone (see the module docstring); returns what
    was removed and how many bytes it held."""
    root, now = Path(root), time.time() if now is None else now
    removed: list[Path] = []
    freed = 0
    if not root.is_dir():
        return removed, freed
    for step_dir in sorted(root.iterdir()):
        if not step_dir.is_dir() or step_dir.is_symlink():
            entries = [step_dir]
        else:
            entries = sorted(step_dir.iterdir())
        for entry in entries:
            match = _OWNER.match(entry.name) if entry.is_dir() else None
            try:
                if match is not None:
                    alive = _alive(match["host"], int(match["pid"]), int(match["start"]))
                    if alive is True or (alive is None and _age_s(entry, now) < max_age_s):
                        continue
                elif _age_s(entry, now) < max_age_s:
                    continue
            except OSError:  # vanished meanwhile
                continue
            freed += _remove(entry)
            removed.append(entry)
        # An emptied folder of the old layout (render-<key>/); rmdir refuses a non-empty one.
        with contextlib.suppress(OSError):
            if step_dir.is_dir() and _age_s(step_dir, now) >= max_age_s:
                step_dir.rmdir()
    return removed, freed
