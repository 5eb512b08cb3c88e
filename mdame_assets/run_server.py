"""A code location's run workers, forked from one warm process (`mdame run-server`).

Under the DefaultRunLauncher a code server starts every run in a new interpreter (Dagster
1.13.27 hard-codes `multiprocessing.get_context("spawn")` in dagster/_grpc/server.py). Before its
first step that interpreter imports Dagster, loads the definitions and imports the storage
modules again: about 3.5 CPU s a run, and a partition has three runs. A run server does that once.
It imports its location's definitions and Dagster's storage modules, then forks one child per
run. The child builds the instance from DAGSTER_HOME and runs the run as `dagster api
execute_run` does (the K8s and Docker launchers' run worker), reporting its pid in the same
"Started process for run" event, so the liveness sweep judges it like any run worker.

`WarmRunLauncher` (mdame_assets/run_launcher.py) sends the daemon's runs here. The protocol is
one JSON line each way over TCP:

    {"start": RUN_ID}       ->  {"pid": N}  or  {"error": "..."}
    {"terminate": RUN_ID}   ->  {"signalled": true|false}
    {"ping": true}          ->  {"location": NAME, "pid": N, "runs": [RUN_ID, ...]}

The server keeps no connection to Dagster's storage open (it builds the instance once, to
load its modules, and closes it): a connection inherited by a fork would be shared by two
processes. It stays single-threaded for the same reason (a fork copies only the calling thread,
so a lock another thread held would stay locked in the child).

It answers a start with an error, and then exits, once a module it loaded has changed on disk:
its children would run code other than the code server's. The launcher then starts that run
through the code server, and the supervisor restarts the run server on the new code.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import logging
import os
import re
import resource
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType

import mdame_assets

# Not under "mdame": that logger writes the JSON lines of MDAME_LOG_FILE (mdame_core/logs.py).
log = logging.getLogger(__name__)

# The modules a location's run workers load (workspace.yaml names the same).
LOCATION_MODULES: Mapping[str, str] = {
    "orchestrator": "mdame_assets.orchestrator",
    "gpu": "mdame_assets.gpu",
}
DEFAULT_PORTS: Mapping[str, int] = {"orchestrator": 4310, "gpu": 4311}
# The run worker's entry point, imported before the first fork so that no run pays for it.
WARM_IMPORTS = ("dagster._cli.api", "dagster._core.execution.api")
# Logged by each run worker as it exits (a fork's counters start at zero): its own CPU, which is
# the run's orchestration, and its child processes' (ffmpeg, espeak).
WORKER_CPU_LINE = "run %s: %.3f CPU s in its worker, %.3f CPU s in the worker's child processes"
RUN_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MAX_REQUEST_BYTES = 4096
# How long a request may take to arrive whole; a client that stalls is dropped.
REQUEST_TIMEOUT_S = 5.0


class StaleCode(RuntimeError):
    """A module the run server loaded changed on disk after it loaded it."""


def location_module(location: str) -> str:
    try:
        return LOCATION_MODULES[location]
    except KeyError:
        raise ValueError(
            f"unknown code location {location!r}: one of {', '.join(LOCATION_MODULES)}"
        ) from None


def parse_address(address: str) -> tuple[str, int]:
    """`HOST:PORT` -> (host, port), with a message naming the bad value."""
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{address!r} is not HOST:PORT (for example 127.0.0.1:4310)")
    return host, int(port)


def _package_files(modules: Mapping[str, ModuleType]) -> dict[str, int]:
    """mtime_ns of every loaded source file of this project (the packages beside
    mdame_assets), the code a fork would run."""
    root = Path(mdame_assets.__file__).resolve().parent.parent
    files: dict[str, int] = {}
    for name, module in list(modules.items()):
        if not name.startswith("mdame_"):
            continue
        path = getattr(module, "__file__", None)
        if not path:
            continue
        resolved = Path(path).resolve()
        if resolved.is_relative_to(root):
            with contextlib.suppress(OSError):
                files[str(resolved)] = resolved.stat().st_mtime_ns
    return files


def changed_file(loaded: Mapping[str, int]) -> str | None:
    """The first loaded source file whose modification time is not the one loaded."""
    for path, mtime in loaded.items():
        try:
            if Path(path).stat().st_mtime_ns != mtime:
                return path
        except OSError:
            return path
    return None


def warm_up(location: str) -> ModuleType:
    """Import the location's definitions, build its repository and jobs, and build the instance
    once (its storage's modules and drivers load on first use), then close it: everything a run
    loads that does not depend on the run."""
    import dagster as dg

    module = importlib.import_module(location_module(location))
    repository = module.defs.get_repository_def()
    for job in repository.get_all_jobs():
        job.get_job_snapshot_id()
    for name in WARM_IMPORTS:
        importlib.import_module(name)
    # Dagster's PostgreSQL storage pools nothing (NullPool): closing the instance leaves no
    # connection for a child to inherit.
    with dg.DagsterInstance.get() as instance:
        instance.get_run_records(limit=1)
    return module


def run_in_child(location: str, run_id: str) -> int:
    """The run worker, in the forked child: Dagster's own `execute_run` body on an instance of
    this process (DAGSTER_HOME). Refuses a run of another location."""
    import dagster as dg
    from dagster._cli.api import _execute_run_command_body
    from dagster._utils.interrupts import capture_interrupts

    from mdame_assets.runtime import hold_storage_connections

    # As `dagster api execute_run`: an interrupt is raised only where Dagster can handle it.
    with capture_interrupts(), dg.DagsterInstance.get() as instance:
        # From the run's first storage call, not its first step: 30-40 fewer connections a run.
        hold_storage_connections(instance)
        run = instance.get_run_by_id(run_id)
        if run is None:
            log.error(
                "run %s is not in the instance of DAGSTER_HOME %s",
                run_id,
                os.environ.get("DAGSTER_HOME"),
            )
            return 2
        origin = run.remote_job_origin
        run_location = origin.location_name if origin is not None else None
        if run_location != location:
            instance.report_run_failed(
                run,
                f"the run server of code location {location!r} was sent a run of "
                f"{run_location!r}: check the launcher's servers in dagster.yaml",
            )
            return 2
        return _execute_run_command_body(
            run_id, instance, lambda _event: None, set_exit_code_on_failure=False
        )


@dataclass
class RunServer:
    location: str
    host: str = "127.0.0.1"
    port: int = 0
    children: dict[int, str] = field(default_factory=dict)  # pid -> run id
    stopping: bool = False
    exit_code: int = 0

    def __post_init__(self) -> None:
        self._loaded: dict[str, int] = {}
        self._listener: socket.socket | None = None

    def bind(self) -> tuple[str, int]:
        """Load the location and listen; returns the bound address (port 0 picks one)."""
        warm_up(self.location)
        self._loaded = _package_files(sys.modules)
        if threading.active_count() != 1:
            # A fork copies only this thread; a lock another one holds would stay held.
            names = ", ".join(t.name for t in threading.enumerate())
            raise RuntimeError(f"loading {self.location} started threads ({names}): cannot fork")
        listener = socket.create_server((self.host, self.port), backlog=64)
        listener.settimeout(0.5)
        self._listener = listener
        self.host, self.port = listener.getsockname()[:2]
        return self.host, self.port

    def serve_forever(self) -> int:
        """Answer requests until SIGTERM or SIGINT, or until the code changes; returns the exit
        status (3: stale code, for a supervisor that restarts it)."""
        if self._listener is None:
            self.bind()
        assert self._listener is not None

        def stop(_signum: int, _frame: FrameType | None) -> None:
            self.stopping = True

        previous = {s: signal.signal(s, stop) for s in (signal.SIGTERM, signal.SIGINT)}
        log.info(
            "run server of %s listening on %s:%s (pid %s)",
            self.location, self.host, self.port, os.getpid(),
        )  # fmt: skip
        try:
            while not self.stopping:
                self.reap()
                try:
                    conn, _ = self._listener.accept()
                except TimeoutError:
                    continue
                except InterruptedError:
                    continue
                with conn:
                    self._answer(conn)
        finally:
            self._listener.close()
            for signum, handler in previous.items():
                signal.signal(signum, handler)
            self.reap()
        # Runs in progress are children of their own: they finish without this process.
        log.info(
            "run server of %s stopped; %d runs still running", self.location, len(self.children)
        )
        return self.exit_code

    def reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                self.children.clear()
                return
            if pid == 0:
                return
            run_id = self.children.pop(pid, "?")
            log.info("run %s (pid %s) ended with status %s", run_id, pid, status)

    def _answer(self, conn: socket.socket) -> None:
        conn.settimeout(REQUEST_TIMEOUT_S)
        try:
            reply = self.handle(_read_request(conn))
        except ValueError as exc:
            reply = {"error": f"bad request: {exc}"}
        except OSError as exc:  # the request cut off, or no fork (no memory, no pids left)
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        with contextlib.suppress(OSError):
            conn.sendall(json.dumps(reply).encode() + b"\n")

    def handle(self, request: Mapping[str, object]) -> dict[str, object]:
        self.reap()  # a run worker that has exited is no longer this server's
        if "ping" in request:
            return {
                "location": self.location,
                "pid": os.getpid(),
                "runs": sorted(self.children.values()),
            }
        if "terminate" in request:
            run_id = _run_id(request["terminate"])
            for pid, child_run in self.children.items():
                if child_run == run_id:
                    # What the code server's termination does: an interrupt in the run worker,
                    # which Dagster turns into a canceled run.
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGINT)
                        return {"signalled": True}
            return {"signalled": False}
        if "start" in request:
            run_id = _run_id(request["start"])
            changed = changed_file(self._loaded)
            if changed is not None:
                self.stopping, self.exit_code = True, 3
                return {"error": f"stale code: {changed} changed since this run server loaded it"}
            return {"pid": self._fork(run_id)}
        raise ValueError(f"unknown request {sorted(request)}")

    def _fork(self, run_id: str) -> int:
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid:
            self.children[pid] = run_id
            return pid
        # The child: none of the server's sockets or handlers.
        code = 1
        try:
            assert self._listener is not None
            self._listener.close()
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, signal.SIG_DFL)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            code = run_in_child(self.location, run_id)
        except BaseException:
            log.exception("run %s failed in its run worker", run_id)
        finally:
            own, tools = (
                resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
            )
            log.info(
                WORKER_CPU_LINE,
                run_id,
                own.ru_utime + own.ru_stime,
                tools.ru_utime + tools.ru_stime,
            )
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)


def _run_id(value: object) -> str:
    if not isinstance(value, str) or not RUN_ID.match(value):
        raise ValueError(f"{value!r} is not a run id")
    return value


def _read_request(conn: socket.socket) -> dict[str, object]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = conn.recv(MAX_REQUEST_BYTES)
        if not chunk:
            break
        data += chunk
        if len(data) > MAX_REQUEST_BYTES:
            raise ValueError(f"request over {MAX_REQUEST_BYTES} bytes")
    request = json.loads(data or b"null")
    if not isinstance(request, dict):
        raise ValueError("a request is one JSON object on a line")
    return request


def call(address: str, request: Mapping[str, object], timeout_s: float) -> dict[str, object]:
    """One request to a run server and its reply. Raises OSError when it cannot be reached or
    does not answer within `timeout_s`."""
    host, port = parse_address(address)
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=timeout_s) as conn:
        conn.sendall(json.dumps(request).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            conn.settimeout(max(0.1, timeout_s - (time.monotonic() - started)))
            chunk = conn.recv(65536)
            if not chunk:
                break
            data += chunk
    if not data:
        raise ConnectionError(f"the run server at {address} closed the connection unanswered")
    reply = json.loads(data)
    if not isinstance(reply, dict):
        raise ConnectionError(f"the run server at {address} answered {data[:200]!r}")
    return reply
