"""Warm run workers: `mdame run-server` forks the daemon's runs, and the `WarmRunLauncher` sends
them there, falling back to the code server. Real parts: the run server as an operator starts it,
a managed code server (Dagster's workspace), Dagster's storage and MD-AME's on PostgreSQL, and
the orchestrator location's real housekeeping job.

A run is held in its step by a lock on mdame.dimensions (its first read) taken here, so it is
still running when a process is killed.

The run server answers only its own user, on a Unix socket: the tests also play a hostile client
(another user, a request that raises, one that trickles in, starts past its cap or twice)."""

from __future__ import annotations

import json
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psycopg
import pytest
import yaml
from liveness_kit import REPO, World, wait_for

from mdame_runtime import liveness
from mdame_runtime.liveness import run_is_dead, sweep
from mdame_runtime.run_launcher import RUN_SERVER_TAG, WarmRunLauncher
from mdame_runtime.run_server import call
from tests import launchkit

LOCATION = "orchestrator"


@dataclass
class Server:
    proc: subprocess.Popen
    address: str
    log: Path

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


# Short, so that a hostile client is dropped within the test; one run at a time, so that the
# cap is reached with one held run.
SERVER_ENV = {"MDAME_RUN_SERVER_REQUEST_TIMEOUT_S": "1", "MDAME_RUN_SERVER_MAX_RUNS": "1"}


def server_command(path: str) -> list[str]:
    mdame = str(Path(sys.executable).parent / "mdame")
    return [mdame, "run-server", "--location", LOCATION, "--socket", path]


def start_server(world: World, path: str) -> Server:
    log = world.home / "run-server.log"
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(
        server_command(path), cwd=REPO, env=world.env(**SERVER_ENV), stdout=out,
        stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    out.close()
    server = Server(proc, path, log)

    def answers() -> bool:
        if proc.poll() is not None:
            raise AssertionError(f"run server exited {proc.returncode}:\n{server.tail()}")
        try:
            return call(server.address, {"ping": True}, 1.0)["location"] == LOCATION
        except OSError:
            return False

    wait_for("the run server", answers, timeout=60, every=0.2)
    return server


def stop(proc: subprocess.Popen, signum: int = signal.SIGTERM) -> None:
    with suppress(ProcessLookupError):
        os.kill(proc.pid, signum)
    proc.wait(30)


@pytest.fixture
def setup(world: World, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[World, Server]]:
    """The world's DAGSTER_HOME (the repository's dagster.yaml) and a run server, named to the
    launcher in MDAME_RUN_SERVERS. Its socket is in a folder of its own (mkdtemp's are 0700):
    the system temp folder keeps the path within a socket's 107 bytes."""
    folder = tempfile.mkdtemp(prefix="mdame-run-")
    path = f"{folder}/{LOCATION}.sock"
    dagster_home = world.home / "dagster"
    dagster_home.mkdir(parents=True)
    (dagster_home / "dagster.yaml").symlink_to(REPO / "dagster.yaml")
    for key, value in world.env(MDAME_RUN_SERVERS=f"{LOCATION}={path}").items():
        monkeypatch.setenv(key, value)
    server = start_server(world, path)
    try:
        yield world, server
    finally:
        stop(server.proc, signal.SIGKILL)
        shutil.rmtree(folder, ignore_errors=True)


def launch(instance: dg.DagsterInstance, request) -> str:  # noqa: ANN001
    return launchkit.launch(instance, request, LOCATION, "housekeeping_job")


def finished(instance: dg.DagsterInstance, run_id: str, timeout: float = 90) -> dg.DagsterRun:
    return launchkit.wait_finished(instance, run_id, timeout)


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> int:
    reported = wait_for("the run worker's pid", lambda: liveness.worker_pid(instance, run_id), 60)
    return reported[0]


def engine_messages(instance: dg.DagsterInstance, run_id: str) -> list[str]:
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT)
    return [r.event_log_entry.message or "" for r in records.records]


def parent_pid(pid: int) -> int:
    fields = liveness.stat_fields(pid)
    assert fields is not None, f"process {pid} is gone"
    return int(fields[1])


@contextmanager
def dimensions_locked(world: World) -> Iterator[None]:
    """Holds the housekeeping step at its first read until the block ends."""
    with psycopg.connect(world.owner_url) as conn:
        conn.execute("LOCK TABLE mdame.dimensions IN ACCESS EXCLUSIVE MODE")
        yield
        conn.rollback()


def test_the_run_server_forks_the_launched_run_and_the_run_succeeds(setup):
    world, server = setup
    with world.instance() as instance, launchkit.workspace(instance, LOCATION) as request:
        assert isinstance(instance.run_launcher, WarmRunLauncher)
        with dimensions_locked(world):
            run_id = launch(instance, request)
            pid = worker_pid(instance, run_id)
            # The worker is the run server's child, not the code server's spawned interpreter.
            assert parent_pid(pid) == server.proc.pid
            assert call(server.address, {"ping": True}, 5)["runs"] == [run_id]
        run = finished(instance, run_id)
        assert run.status == dg.DagsterRunStatus.SUCCESS, engine_messages(instance, run_id)
        assert run.tags[RUN_SERVER_TAG] == server.address
        assert instance.get_latest_materialization_event(dg.AssetKey("housekeeping")) is not None
    # The worker's CPU, as it exited, in the server's log; the JSON log holds only JSON lines.
    wait_for("the worker's CPU line", lambda: f"run {run_id}: " in server.log.read_text(), 10)
    pipeline_log = Path(world.env()["MDAME_LOG_FILE"]).read_text().splitlines()
    assert pipeline_log and all(json.loads(line) for line in pipeline_log)


def test_a_run_survives_its_run_server_killed_and_the_next_runs_go_to_the_code_server(setup):
    world, server = setup
    with world.instance() as instance, launchkit.workspace(instance, LOCATION) as request:
        with dimensions_locked(world):
            run_id = launch(instance, request)
            worker_pid(instance, run_id)
            stop(server.proc, signal.SIGKILL)  # the server, not its children
        assert finished(instance, run_id).status == dg.DagsterRunStatus.SUCCESS

        fallback = launch(instance, request)
        run = finished(instance, fallback)
        assert run.status == dg.DagsterRunStatus.SUCCESS
        assert RUN_SERVER_TAG not in run.tags
        said = [m for m in engine_messages(instance, fallback) if "did not start the run" in m]
        assert said and server.address in said[0] and "its code server starts it" in said[0]

        # A code server's run terminated while STARTING is canceled too.
        with dimensions_locked(world):
            spawned = launch(instance, request)
            assert instance.run_launcher.terminate(spawned)
            assert finished(instance, spawned, 30).status == dg.DagsterRunStatus.CANCELED

    # The killed server's socket is left behind; one started again (as `mdame ui` restarts it)
    # replaces it.
    assert Path(server.address).is_socket()
    again = start_server(world, server.address)
    try:
        assert call(server.address, {"ping": True}, 5)["pid"] == again.proc.pid
    finally:
        stop(again.proc)


def test_a_killed_run_worker_is_found_dead_and_its_run_failed(setup):
    world, server = setup
    with world.instance() as instance, launchkit.workspace(instance, LOCATION) as request:
        with dimensions_locked(world):
            run_id = launch(instance, request)
            pid = worker_pid(instance, run_id)
            record = instance.get_run_record_by_id(run_id)
            assert record is not None
            assert not run_is_dead(instance, record, local_workers=True, location=LOCATION)
            os.kill(pid, signal.SIGKILL)
            wait_for("the worker to be reaped", lambda: not Path(f"/proc/{pid}").exists(), 10)
        record = instance.get_run_record_by_id(run_id)
        assert record is not None
        assert run_is_dead(instance, record, local_workers=True, location=LOCATION)
        sweep(instance, None, local_workers=True, location=LOCATION)
        assert finished(instance, run_id, timeout=5).status == dg.DagsterRunStatus.FAILURE
        assert server.proc.poll() is None  # the server goes on


def test_a_forked_run_is_terminated_through_its_run_server(setup):
    world, server = setup
    with world.instance() as instance, launchkit.workspace(instance, LOCATION) as request:
        with dimensions_locked(world):
            run_id = launch(instance, request)
            # At once, while the run is STARTING: the launcher waits for its RUN_START, which
            # would overwrite an earlier CANCELING (the run would fail instead).
            assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTING
            assert instance.run_launcher.terminate(run_id)
            run = finished(instance, run_id, timeout=30)
        assert run.status == dg.DagsterRunStatus.CANCELED, engine_messages(instance, run_id)
        assert not instance.run_launcher.terminate(run_id)  # a finished run
        # Once the worker has exited, the server has nothing to signal.
        wait_for("the worker reaped", lambda: not call(server.address, {"ping": 1}, 5)["runs"], 10)
        assert not call(server.address, {"terminate": run_id}, 5)["signalled"]


def test_a_run_server_whose_code_changed_refuses_and_exits_for_a_restart(setup):
    world, server = setup
    loaded = REPO / "mdame_runtime" / "run_outcomes.py"
    stat = loaded.stat()
    try:
        os.utime(loaded, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        reply = call(server.address, {"start": "0" * 8 + "-0000-0000-0000-" + "0" * 12}, 10)
    finally:
        os.utime(loaded, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "stale code" in str(reply["error"]) and "run_outcomes.py" in str(reply["error"])
    assert server.proc.wait(10) == 3
    assert not Path(server.address).exists()  # its own socket, removed as it exits


def send_line(path: str, line: bytes) -> str:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(path)
        conn.sendall(line)
        return conn.makefile().readline()


def test_a_bad_request_is_answered_with_what_was_wrong(setup):
    _, server = setup
    for request_line, error in [
        (b'{"start": "../../etc"}\n', "is not a run id"),
        (b'{"launch": 1}\n', "unknown request"),
        (b"[1, 2]\n", "one JSON object"),
        (b"not json\n", "bad request"),
    ]:
        reply = send_line(server.address, request_line)
        assert error in reply, (request_line, reply)
    assert call(server.address, {"ping": True}, 5)["runs"] == []


def test_a_hostile_client_neither_stops_nor_holds_the_run_server(setup):
    _, server = setup
    # json's decoder raises RecursionError (not a ValueError) on deep nesting.
    for line in (b"[" * 2000 + b"\n", b'{"ping": ' + b"[" * 4000 + b"}\n"):
        assert "nested too deeply" in send_line(server.address, line)
        assert server.proc.poll() is None
    # A byte every 0.2 s, each well within any timeout per read: the request as a whole has
    # MDAME_RUN_SERVER_REQUEST_TIMEOUT_S (1 s here), then the client is answered and dropped.
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(10)
        conn.connect(server.address)
        reply, sent = b"", 0
        while not reply and sent < 100:
            conn.sendall(b" ")
            sent += 1
            if select.select([conn], [], [], 0.2)[0]:
                reply = conn.recv(4096)
    assert b"no whole request within 1 s" in reply, (sent, reply)
    assert call(server.address, {"ping": True}, 5)["location"] == LOCATION


def test_a_run_is_started_once_and_at_most_max_runs_at_a_time(setup):
    """Started by id, as any client may: the worker finds no such run in the instance and
    exits. Held alive meanwhile by a lock on Dagster's runs table (its first read)."""
    world, server = setup
    first, second = str(uuid.uuid4()), str(uuid.uuid4())
    with psycopg.connect(world.dagster_url) as conn:
        conn.execute("LOCK TABLE runs IN ACCESS EXCLUSIVE MODE")
        pid = call(server.address, {"start": first}, 10)["pid"]
        assert call(server.address, {"ping": True}, 5)["runs"] == [first]
        again = call(server.address, {"start": first}, 10)
        assert again == {
            "error": f"run {first} was started already by this run server (pid {pid}, running): "
            "a run has one worker"
        }
        over = call(server.address, {"start": second}, 10)
        assert over == {"error": "at its cap of live run workers (MDAME_RUN_SERVER_MAX_RUNS=1)"}
        conn.rollback()
    wait_for("the worker reaped", lambda: not call(server.address, {"ping": 1}, 5)["runs"], 30)
    # Ended, it is still never started again; and its place is free for another run.
    assert f"(pid {pid}, exited)" in str(call(server.address, {"start": first}, 10)["error"])
    assert isinstance(call(server.address, {"start": second}, 10)["pid"], int)
    wait_for("the worker reaped", lambda: not call(server.address, {"ping": 1}, 5)["runs"], 30)


# Another user's process (uid 65534). With its own file access (fsuid) it cannot even reach
# the socket; with root's file access it reaches it, and the server refuses its uid.
OTHER_USER = """
import ctypes, os, socket, sys
os.seteuid(65534)
if sys.argv[2] == "root-files":
    ctypes.CDLL(None, use_errno=True).setfsuid(0)
with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
    conn.settimeout(10)
    try:
        conn.connect(sys.argv[1])
    except PermissionError:
        print("PermissionError", end="")
        sys.exit()
    # Refused at once, maybe before this is sent: the reply waits to be read all the same.
    try:
        conn.sendall(b'{"ping": true}\\n')
    except BrokenPipeError:
        pass
    print(conn.makefile().readline(), end="")
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="playing another user needs root")
def test_only_the_run_servers_own_user_reaches_it(setup):
    world, server = setup
    folder = Path(server.address).parent
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    assert oct(Path(server.address).stat().st_mode & 0o777) == "0o600"

    def as_other_user(files: str) -> str:
        argv = [sys.executable, "-c", OTHER_USER, server.address, files]
        done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert as_other_user("own-files") == "PermissionError"
    refused = json.loads(as_other_user("root-files"))
    assert refused == {"error": "refused: uid 65534 is not this run server's user"}
    # It goes on serving its own user, and a second server cannot take its socket.
    assert call(server.address, {"ping": True}, 5)["location"] == LOCATION
    second = subprocess.run(
        server_command(server.address), cwd=REPO, env=world.env(), capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert second.returncode == 1
    assert f"another run server is listening on {server.address}" in second.stderr
    assert call(server.address, {"ping": True}, 5)["pid"] == server.proc.pid


def test_a_run_server_refuses_a_socket_folder_others_may_enter(tmp_path: Path):
    """Before it loads anything: the folder's mode is the whole of its access control."""
    folder = tmp_path / "run"
    folder.mkdir(mode=0o755)
    folder.chmod(0o755)
    from tests.childenv import child_environ

    env = {
        **child_environ("DAGSTER_"),
        "ENV": "dev",
        "MDAME_HOME": str(tmp_path),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "MDAME_DAGSTER_DATABASE_URL": "postgresql://nobody@127.0.0.1:1/never",
    }
    refused = subprocess.run(
        server_command(str(folder / "o.sock")), cwd=REPO, env=env, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode == 1, refused.stderr
    assert f"socket folder {folder} is mode 0755" in refused.stderr
    assert f"chmod 700 {folder}" in refused.stderr
    assert not (folder / "o.sock").exists()


def test_launcher_settings_name_what_is_wrong():
    from mdame_runtime.run_launcher import parse_servers

    assert parse_servers("") == {}
    assert parse_servers("orchestrator=/srv/run/orchestrator.sock, gpu=/srv/run/gpu.sock") == {
        "orchestrator": "/srv/run/orchestrator.sock",
        "gpu": "/srv/run/gpu.sock",
    }
    for bad, said in [
        ("orchestrator", "not LOCATION=SOCKET_PATH"),
        ("render=/srv/run/render.sock", "'render' is not a code location"),
        ("gpu=127.0.0.1:4311", "'127.0.0.1:4311' is not the absolute path of a Unix socket"),
        ("gpu=run/gpu.sock", "is not the absolute path of a Unix socket"),
        ("gpu=/" + "x" * 107, "is 108 bytes, over the 107 of a Unix socket's path"),
    ]:
        with pytest.raises(ValueError, match=said):
            parse_servers(bad)


def test_doctor_reports_each_run_server_by_location(setup, monkeypatch: pytest.MonkeyPatch):
    from mdame_cli.doctor import Options, run_doctor
    from mdame_domain.doctor import Status

    _, server = setup
    down = str(Path(server.address).parent / "gpu.sock")  # no server there

    def rows(servers: str) -> dict[str, tuple[Status, str]]:
        monkeypatch.setenv("MDAME_RUN_SERVERS", servers)
        checks = run_doctor(Options(only=frozenset({"run_servers"}), timeout_s=5))
        return {c.name: (c.status, c.detail) for c in checks}

    found = rows(f"orchestrator={server.address},gpu={down}")
    assert found["run_servers:orchestrator"][0] is Status.OK
    assert f"pid {server.proc.pid}" in found["run_servers:orchestrator"][1]
    status, detail = found["run_servers:gpu"]
    assert status is Status.WARN and down in detail and "spawns gpu's runs instead" in detail
    assert f"--socket {down}" in detail
    status, detail = rows(f"gpu={server.address}")["run_servers:gpu"]
    assert status is Status.FAIL and "the run server of 'orchestrator', not 'gpu'" in detail
    status, detail = rows("gpu=127.0.0.1:4311")["run_servers"]
    assert (
        status is Status.FAIL and "MDAME_RUN_SERVERS: '127.0.0.1:4311' is not the absol" in detail
    )
    assert rows("")["run_servers"][0] is Status.SKIP


def test_a_bad_run_servers_setting_fails_the_launcher_naming_it(monkeypatch):
    """As Dagster builds it from dagster.yaml's run_launcher entry (every process's instance)."""
    from dagster._core.launcher import RunLauncher
    from dagster._serdes.config_class import ConfigurableClassData

    entry = yaml.safe_load((REPO / "dagster.yaml").read_text())["run_launcher"]
    data = ConfigurableClassData(entry["module"], entry["class"], yaml.safe_dump({}))
    monkeypatch.setenv("MDAME_RUN_SERVERS", "orchestrator:4310")
    with pytest.raises(ValueError, match=r"MDAME_RUN_SERVERS: 'orchestrator:4310' is not LOC"):
        data.rehydrate(RunLauncher)
    # The TCP addresses of old: a socket path now.
    monkeypatch.setenv("MDAME_RUN_SERVERS", "gpu=127.0.0.1:4311")
    with pytest.raises(ValueError, match=r"MDAME_RUN_SERVERS: '127.0.0.1:4311' is not the abs"):
        data.rehydrate(RunLauncher)
    monkeypatch.setenv("MDAME_RUN_SERVERS", "gpu=/srv/run/gpu.sock")
    assert data.rehydrate(RunLauncher).servers == {"gpu": "/srv/run/gpu.sock"}  # type: ignore[attr-defined]
