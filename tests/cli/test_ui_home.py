"""`mdame ui` starts `dagster dev` in DAGSTER_HOME, so Dagster no longer warns that the
repository's dagster.yaml "will not be used" (it is used: linked into DAGSTER_HOME)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time

from mdame_core.settings import REPO_ROOT

WARNING = "will not be used"
STARTED = "Launching Dagster services"  # logged right after the warning's check


def _startup_output(command: list[str], env: dict[str, str], cwd: str) -> str:
    """What `dagster dev` logs until it launches its services; then its group is stopped."""
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + 120
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if STARTED in line or time.monotonic() > deadline:
                break
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        # Whatever of the group outlived its leader (a code server that ignores SIGTERM, or
        # waits for runs to end) goes too: nothing the test started may outlive it.
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    return "".join(lines)


def test_mdame_ui_prints_no_dagster_yaml_warning(shell_env) -> None:
    mdame = str(REPO_ROOT / ".venv" / "bin" / "mdame")  # ENV unset: dev, as in a fresh shell
    output = _startup_output([mdame, "ui", "--port", "0"], shell_env, str(REPO_ROOT))
    assert STARTED in output, output[-3000:]
    assert WARNING not in output, output[-3000:]


def test_dagster_dev_from_the_checkout_would_warn(shell_env) -> None:
    """The same start from the repository folder (as `make ui` did) shows the warning: the
    check above can fail."""
    env = {**shell_env, "ENV": "dev", "DAGSTER_HOME": shell_env["MDAME_HOME"] + "/dagster"}
    dagster = str(REPO_ROOT / ".venv" / "bin" / "dagster")
    command = [dagster, "dev", "-w", str(REPO_ROOT / "workspace.yaml"), "-p", "0"]
    output = _startup_output(command, env, str(REPO_ROOT))
    assert WARNING in output, output[-3000:]
