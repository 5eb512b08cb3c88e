"""One TMPDIR per test session (and per crash-harness run), under the run's own scratch folder.

Tests SIGKILL processes on purpose (the crash matrix, the liveness tests): Python's tempfile,
Dagster and ffmpeg helpers in those processes never get to remove their temp folders, and they
piled up as hundreds of empty /tmp/tmpXXXXXXXX folders. With TMPDIR pointing at a folder of the
session, children inherit it and whatever they leave is removed with it at the session's end.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

from mdame_core.settings import mdame_home

OWNER_VAR = "MDAME_TEST_TMPDIR_OWNER"  # the pid that made the folder, and so removes it
# Unix sockets (PostgreSQL's, Dagster's gRPC) live under TMPDIR; their paths max out at 107
# bytes, so a deep checkout falls back to the system temp folder (still one folder to remove).
MAX_BASE_LEN = 60


def private_tmpdir() -> Path | None:
    """Point TMPDIR at a fresh folder; None in an xdist worker, which shares its controller's."""
    if os.environ.get(OWNER_VAR):
        return None
    base = mdame_home() / "tmp"
    if len(str(base)) <= MAX_BASE_LEN:
        base.mkdir(parents=True, exist_ok=True)
        folder = Path(tempfile.mkdtemp(prefix=f"pytest-{os.getpid()}-", dir=base))
    else:
        folder = Path(tempfile.mkdtemp(prefix="mdame-tests-"))
    os.environ["TMPDIR"] = str(folder)
    os.environ[OWNER_VAR] = str(os.getpid())
    tempfile.tempdir = None  # recomputed from TMPDIR
    return folder


def remove_private_tmpdir(folder: Path | None) -> None:
    if folder is not None and os.environ.get(OWNER_VAR) == str(os.getpid()):
        shutil.rmtree(folder, ignore_errors=True)
