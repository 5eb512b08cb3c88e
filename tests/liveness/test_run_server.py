"""Warm run workers: `mdame run-server` forks the daemon's runs, and the `WarmRunLauncher` sends
them there, falling back to the code server. Real parts: the run server as an operator starts it,
a managed code server (Dagster's workspace), Dagster's storage and MD-AME's on PostgreSQL, and
the orchestrator location's real housekeeping job.

A run is held in its step by a lock on mdame.dimensions (its first read) taken here, so it is
still running when a process is killed."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import psycopg
import pytest
import yaml
from liveness_kit import REPO, World, wait_for

from mdame_assets import liveness
from mdame_assets.liveness import run_is_dead, sweep
from mdame_assets.run_launcher import RUN_SERVER_TAG, WarmRunLauncher
from mdame_assets.run_server import call
from mdame_cli.ui import free_port
from tests import launchkit

LOCATION = "orchestrator"


@dataclass
class Server:
    proc: subprocess.Popen
    address: str
    log: Path

    def tail(self) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-30:])


def start_server(world: World, port: int) -> Server:
    log = world.home / f"run-server-{port}.log"
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "mdame"), "run-server", "--location", LOCATION,
         "--bind", f"127.0.0.1:{port}"],
        cwd=REPO, env=world.env(), stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
    )  # fmt: skip
    out.close()
    server = Server(proc, f"127.0.0.1:{port}", log)

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
    launcher in MDAME_RUN_SERVERS."""
    port = free_port()
    dagster_home = world.home / "dagster"
    dagster_home.mkdir(parents=True)
    (dagster_home / "dagster.yaml").symlink_to(REPO / "dagster.yaml")
    for key, value in world.env(MDAME_RUN_SERVERS=f"{LOCATION}=127.0.0.1:{port}").items():
        monkeypatch.setenv(key, value)
    server = start_server(world, port)
    try:
        yield world, server
    finally:
        stop(server.proc, signal.SIGKILL)


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
    loaded = REPO / "mdame_assets" / "run_outcomes.py"
    stat = loaded.stat()
    try:
        os.utime(loaded, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
        reply = call(server.address, {"start": "0" * 8 + "-0000-0000-0000-" + "0" * 12}, 10)
    finally:
        os.utime(loaded, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert "stale code" in str(reply["error"]) and "run_outcomes.py" in str(reply["error"])
    assert server.proc.wait(10) == 3


def test_a_bad_request_is_answered_with_what_was_wrong(setup):
    import socket

    _, server = setup
    host, port = server.address.split(":")
    for request_line, error in [
        (b'{"start": "../../etc"}\n', "is not a run id"),
        (b'{"launch": 1}\n', "unknown request"),
        (b"[1, 2]\n", "one JSON object"),
        (b"not json\n", "bad request"),
    ]:
        with socket.create_connection((host, int(port)), timeout=5) as conn:
            conn.sendall(request_line)
            reply = conn.makefile().readline()
        assert error in reply, (request_line, reply)
    assert call(server.address, {"ping": True}, 5)["runs"] == []


def test_launcher_settings_name_what_is_wrong():
    from mdame_assets.run_launcher import parse_servers

    assert parse_servers("") == {}
    assert parse_servers("orchestrator=127.0.0.1:4310, gpu=10.0.0.2:4311") == {
        "orchestrator": "127.0.0.1:4310",
        "gpu": "10.0.0.2:4311",
    }
    for bad, said in [
        ("orchestrator", "not LOCATION=HOST:PORT"),
        ("render=127.0.0.1:1", "'render' is not a code location"),
        ("gpu=127.0.0.1", "is not HOST:PORT"),
        ("gpu=127.0.0.1:99999", "is not HOST:PORT"),
    ]:
        with pytest.raises(ValueError, match=said):
            parse_servers(bad)


def test_doctor_reports_each_run_server_by_location(setup, monkeypatch: pytest.MonkeyPatch):
    from mdame_cli.doctor import Options, run_doctor
    from mdame_domain.doctor import Status

    _, server = setup
    down = f"127.0.0.1:{free_port()}"

    def rows(servers: str) -> dict[str, tuple[Status, str]]:
        monkeypatch.setenv("MDAME_RUN_SERVERS", servers)
        checks = run_doctor(Options(only=frozenset({"run_servers"}), timeout_s=5))
        return {c.name: (c.status, c.detail) for c in checks}

    found = rows(f"orchestrator={server.address},gpu={down}")
    assert found["run_servers:orchestrator"][0] is Status.OK
    assert f"pid {server.proc.pid}" in found["run_servers:orchestrator"][1]
    status, detail = found["run_servers:gpu"]
    assert status is Status.WARN and down in detail and "spawns gpu's runs instead" in detail
    status, detail = rows(f"gpu={server.address}")["run_servers:gpu"]
    assert status is Status.FAIL and "the run server of 'orchestrator', not 'gpu'" in detail
    status, detail = rows("gpu=nowhere")["run_servers"]
    assert status is Status.FAIL and "'nowhere' is not HOST:PORT" in detail
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
    monkeypatch.setenv("MDAME_RUN_SERVERS", "gpu=127.0.0.1:4311")
    assert data.rehydrate(RunLauncher).servers == {"gpu": "127.0.0.1:4311"}  # type: ignore[attr-defined]


def test_the_run_servers_locations_are_the_workspaces():
    """LOCATION_MODULES repeats workspace.yaml for processes that do not read it: they agree."""
    from mdame_assets.run_server import LOCATION_MODULES

    entries = yaml.safe_load((REPO / "workspace.yaml").read_text())["load_from"]
    workspace = {
        e["python_module"]["location_name"]: e["python_module"]["module_name"] for e in entries
    }
    assert workspace == dict(LOCATION_MODULES)
