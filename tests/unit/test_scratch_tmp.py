"""Temp files of killed processes land in the run's own scratch folder, not in /tmp."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from mdame_core.settings import REPO_ROOT


def _child_tmp(env: dict[str, str]) -> Path:
    code = (
        "from mdame_core import settings; settings.use_scratch_tmpdir(); "
        "import tempfile; print(tempfile.mkdtemp())"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        timeout=60,
        check=True,
    )
    return Path(done.stdout.strip())


def test_mdame_commands_put_temp_files_under_the_home(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "TMPDIR"}
    # A short home, as a checkout's .mdame is (a deep one keeps /tmp: socket path limits).
    home = Path(tempfile.mkdtemp(prefix="mdame-t-", dir="/tmp"))
    try:
        assert _child_tmp({**env, "MDAME_HOME": str(home)}).parent == home / "tmp"
        # A TMPDIR the operator set is kept.
        assert _child_tmp({**env, "MDAME_HOME": str(home), "TMPDIR": str(tmp_path)}).parent == (
            tmp_path
        )
    finally:
        shutil.rmtree(home, ignore_errors=True)
