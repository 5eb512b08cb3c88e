"""`mdame ui` runs `dagster dev` as the leader of its own process group and passes a SIGTERM on
to the whole group: nothing it started outlives it. Shown with a stand-in command that starts
children of its own (as `dagster dev` starts the webserver, the daemon and code servers)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from liveness_kit import wait_for

from mdame_cli.ui import run_server_commands

# A "dagster dev": starts two children that would run forever, records their pids, waits.
FAKE_DEV = """
import subprocess, sys, time
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"]) for _ in (1, 2)]
open(sys.argv[1], "w").write(" ".join(str(k.pid) for k in kids))
time.sleep(300)
"""

# `mdame ui` itself, with the stand-in in place of `dagster dev`.
UI = """
import sys
from mdame_cli.ui import run_in_own_group
sys.exit(run_in_own_group([sys.executable, "-c", sys.argv[1], sys.argv[2]], grace_s=5))
"""


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


# A "dagster dev" whose own shutdown hangs: it ignores SIGTERM (as its children may).
STUBBORN_DEV = FAKE_DEV.replace("import subprocess", "import signal, subprocess").replace(
    "time.sleep(300)\n", "signal.signal(signal.SIGTERM, signal.SIG_IGN)\ntime.sleep(300)\n", 1
)


def test_sigterm_to_mdame_ui_stops_dagster_dev_and_all_its_children(tmp_path):
    pids_file = tmp_path / "pids"
    ui = subprocess.Popen([sys.executable, "-c", UI, FAKE_DEV, str(pids_file)])
    try:
        pids = wait_for(
            "the stand-in's children",
            lambda: pids_file.exists() and pids_file.read_text().split(),
            timeout=30,
        )
        children = [int(p) for p in pids]
        assert all(alive(p) for p in children)
        leader = os.getpgid(children[0])
        assert leader != os.getpgid(0)  # its own group, not ours

        ui.send_signal(signal.SIGTERM)
        code = ui.wait(timeout=20)
        assert code == 128 + signal.SIGTERM
        wait_for("the children to be gone", lambda: not any(alive(p) for p in children), 10)
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()
    time.sleep(0.1)
    assert not any(alive(p) for p in children)


def test_a_dagster_dev_that_hangs_in_its_shutdown_is_killed_after_the_grace(tmp_path):
    pids_file = tmp_path / "pids"
    ui = subprocess.Popen([sys.executable, "-c", UI, STUBBORN_DEV, str(pids_file)])
    try:
        pids = wait_for(
            "the stand-in's children",
            lambda: pids_file.exists() and pids_file.read_text().split(),
            timeout=30,
        )
        children = [int(p) for p in pids]
        time.sleep(0.5)  # its SIGTERM handler is in place
        ui.send_signal(signal.SIGTERM)
        code = ui.wait(timeout=30)  # grace_s=5, then SIGKILL
        assert code == 128 + signal.SIGKILL
        wait_for("the children to be gone", lambda: not any(alive(p) for p in children), 10)
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()


# `mdame ui` with a companion (as the run servers are): it appends its pid to a file and exits
# at once the first time (as a run server does when its code changed), then stays.
COMPANION = """
import sys, time
path = sys.argv[1]
with open(path, "a") as f:
    f.write(f"{__import__('os').getpid()} ")
if len(open(path).read().split()) == 1:
    sys.exit(3)
time.sleep(300)
"""
UI_WITH_COMPANION = """
import sys
from mdame_cli.ui import run_in_own_group
companion = [sys.executable, "-c", sys.argv[3], sys.argv[4]]
sys.exit(run_in_own_group([sys.executable, "-c", sys.argv[1], sys.argv[2]], grace_s=5,
                          companions=[companion]))
"""


def test_a_companion_runs_in_the_group_is_restarted_when_it_exits_and_stops_with_it(tmp_path):
    pids_file, companion_file = tmp_path / "pids", tmp_path / "companion"
    ui = subprocess.Popen(
        [sys.executable, "-c", UI_WITH_COMPANION, FAKE_DEV, str(pids_file), COMPANION,
         str(companion_file)]
    )  # fmt: skip
    try:
        companions = wait_for(
            "the companion started again",
            lambda: companion_file.exists() and len(companion_file.read_text().split()) == 2,
            timeout=30,
        ) and [int(p) for p in companion_file.read_text().split()]
        listed = wait_for("children", lambda: pids_file.exists() and pids_file.read_text(), 30)
        children = [int(p) for p in listed.split()]
        assert os.getpgid(companions[1]) == os.getpgid(children[0]) != os.getpgid(0)
        assert alive(companions[1]) and not alive(companions[0])
        ui.send_signal(signal.SIGTERM)
        assert ui.wait(timeout=20) == 128 + signal.SIGTERM
        wait_for("all gone", lambda: not any(alive(p) for p in [*children, companions[1]]), 10)
        time.sleep(1.0)  # no companion is started again once the group stops
        assert len(companion_file.read_text().split()) == 2
    finally:
        if ui.poll() is None:
            ui.kill()
            ui.wait()


def test_ui_names_a_run_server_per_location_on_a_socket_under_mdame_home(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("MDAME_RUN_SERVERS", raising=False)
    monkeypatch.setenv("MDAME_HOME", str(tmp_path))
    commands = run_server_commands()
    sockets = {loc: str(tmp_path / "run" / f"{loc}.sock") for loc in ("orchestrator", "gpu")}
    assert os.environ["MDAME_RUN_SERVERS"] == ",".join(f"{k}={v}" for k, v in sockets.items())
    assert [c[1:] for c in commands] == [
        ["run-server", "--location", loc, "--socket", path] for loc, path in sockets.items()
    ]
    # The operator's setting stands (empty: no run servers).
    monkeypatch.setenv("MDAME_RUN_SERVERS", "")
    assert run_server_commands() == []
    # A home too deep for a socket's path: the code servers spawn the runs, and it says why.
    monkeypatch.delenv("MDAME_RUN_SERVERS")
    monkeypatch.setenv("MDAME_HOME", str(tmp_path / ("d" * 100)))
    assert run_server_commands() == []
    assert "MDAME_RUN_SERVERS" not in os.environ
    said = capsys.readouterr().err
    assert "no run servers, the code servers spawn every run" in said
    assert "over the 107 of a Unix socket's path" in said
