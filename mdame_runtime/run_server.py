"""A code location's run workers, forked from one warm process (`mdame run-server`).

Under the DefaultRunLauncher a code server starts every run in a new interpreter (Dagster
1.13.27 hard-codes `multiprocessing.get_context("spawn")` in dagster/_grpc/server.py). Before its
first step that interpreter imports Dagster, loads the definitions and imports the storage
modules again: about 3.5 CPU s a run, and a partition has three runs. A run server does that once.
It imports its location's definitions and Dagster's storage modules, then forks one child per
run. The child builds the instance from DAGSTER_HOME and runs the run as `dagster api
execute_run` does (the K8s and Docker launchers' run worker), reporting its pid in the same
"Started process for run" event, so the liveness sweep judges it like any run worker.

`WarmRunLauncher` (mdame_runtime/run_launcher.py) sends the daemon's runs here. The protocol is
one JSON line each way over a Unix socket:

    {"start": RUN_ID}       ->  {"pid": N}  or  {"error": "..."}
    {"terminate": RUN_ID}   ->  {"signalled": true|false}
    {"ping": true}          ->  {"location": NAME, "pid": N, "runs": [RUN_ID, ...]}

Whoever reaches it can start and stop runs, so only its own user may: the socket is 0600 in a
folder of that user's that no one else may enter (it refuses to serve from any other), and each
peer's uid (SO_PEERCRED) must be its own. A run id is started once (again, it is refused: a run
has one worker), at most MDAME_RUN_SERVER_MAX_RUNS at a time (over it, refused: the launcher
has the code server start it). A request must arrive whole within
MDAME_RUN_SERVER_REQUEST_TIMEOUT_S, and whatever it raises is answered as an error: no client
stops or holds the loop for longer.

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
import stat
import struct
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType, ModuleType

from mdame_core import settings
from mdame_runtime import locations

# Not under "mdame": that logger writes the JSON lines of MDAME_LOG_FILE (mdame_core/logs.py).
log = logging.getLogger(__name__)

# The modules a location's run workers load, from the one list of locations.
LOCATION_MODULES: Mapping[str, str] = locations.LOCATION_MODULES
# `mdame run-server` listens on $MDAME_HOME/run/LOCATION.sock unless told otherwise.
SOCKET_FOLDER = "run"
# sockaddr_un.sun_path holds 108 bytes, its terminating NUL included.
MAX_SOCKET_PATH_BYTES = 107
# The run worker's entry point, imported before the first fork so that no run pays for it.
WARM_IMPORTS = ("dagster._cli.api", "dagster._core.execution.api")
# Logged by each run worker as it exits (a fork's counters start at zero): its own CPU, which is
# the run's orchestration, and its child processes' (ffmpeg, espeak).
WORKER_CPU_LINE = "run %s: %.3f CPU s in its worker, %.3f CPU s in the worker's child processes"
RUN_ID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
MAX_REQUEST_BYTES = 4096
# How long a request may take to arrive whole, from its connection; a client that stalls is
# dropped.
REQUEST_TIMEOUT_ENV = "MDAME_RUN_SERVER_REQUEST_TIMEOUT_S"
# The most run workers alive at once (dagster.yaml runs at most 4 runs at a time in all).
MAX_RUNS_ENV = "MDAME_RUN_SERVER_MAX_RUNS"
# The run ids remembered as started (their pids), so that none is forked twice; the oldest
# are forgotten past this many (Dagster itself refuses a worker for a run already started).
REMEMBERED_RUNS = 100_000
# How often the loop looks up from accept() to reap its children and notice a stop signal.
ACCEPT_POLL_S = 0.5


class RunServerError(RuntimeError):
    """The run server cannot serve where it was asked to (the message says why)."""


class StaleCode(RuntimeError):
    """A module the run server loaded changed on disk after it loaded it."""


def location_module(location: str) -> str:
    try:
        return LOCATION_MODULES[location]
    except KeyError:
        raise ValueError(
            f"unknown code location {location!r}: one of {', '.join(LOCATION_MODULES)}"
        ) from None


def socket_path(value: str) -> str:
    """A run server's socket: an absolute path that fits a Unix socket address, with a message
    naming the bad value."""
    if not value.startswith("/"):
        raise ValueError(
            f"{value!r} is not the absolute path of a Unix socket "
            "(for example /srv/mdame/run/orchestrator.sock)"
        )
    size = len(os.fsencode(value))
    if size > MAX_SOCKET_PATH_BYTES:
        raise ValueError(
            f"{value!r} is {size} bytes, over the {MAX_SOCKET_PATH_BYTES} of a Unix socket's path"
        )
    return value


def default_socket(location: str) -> str:
    """$MDAME_HOME/run/LOCATION.sock, where `mdame run-server` listens unless told otherwise."""
    location_module(location)
    path = str(settings.mdame_home().absolute() / SOCKET_FOLDER / f"{location}.sock")
    try:
        return socket_path(path)
    except ValueError as exc:
        raise ValueError(f"{exc}: give a shorter one (`--socket`, MDAME_RUN_SERVERS)") from None


def private_folder(path: str) -> Path:
    """The socket's folder, made 0700 if missing. File permissions are the run server's only
    gate, so a folder that another user owns, or that its group or others may enter, is
    refused."""
    folder = Path(path).parent
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.stat()
    if info.st_uid != os.geteuid():
        raise RunServerError(
            f"the run server's socket folder {folder} belongs to uid {info.st_uid}, not to this "
            f"user (uid {os.geteuid()}): give it a folder of its own"
        )
    mode = stat.S_IMODE(info.st_mode)
    if mode & 0o077:
        raise RunServerError(
            f"the run server's socket folder {folder} is mode {mode:04o}: other users could "
            f"start and stop runs through it; `chmod 700 {folder}` or give it a folder of its own"
        )
    return folder


def peer_uid(conn: socket.socket) -> int:
    """The uid of the process at the other end of a Unix socket, as the kernel recorded it when
    that process connected."""
    creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
    _pid, uid, _gid = struct.unpack("3i", creds)
    return int(uid)


def _package_files(modules: Mapping[str, ModuleType]) -> dict[str, int]:
    """mtime_ns of every loaded source file of this project (the packages beside
    mdame_runtime), the code a fork would run."""
    root = Path(__file__).resolve().parent.parent
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
    repository = module.defs().get_repository_def()  # a @dg.definitions function
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

    from mdame_runtime.step import hold_storage_connections

    # As `dagster api execute_run`: an interrupt is raised only where Dagster can handle it.
    with capture_interrupts(), dg.DagsterInstance.get() as instance:
        # From the run's first storage call, not its first step: 30-40 fewer connections a run.
        hold_storage_connections(instance)
        run = instance.get_run_by_id(run_id)
        if run is None:
            log.error(
                "run %s is not in the instance of DAGSTER_HOME %s",
                run_id,
                settings.raw("DAGSTER_HOME"),
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
    path: str
    request_timeout_s: float = field(default_factory=lambda: settings.get(REQUEST_TIMEOUT_ENV))
    max_runs: int = field(default_factory=lambda: settings.get(MAX_RUNS_ENV))
    children: dict[int, str] = field(default_factory=dict)  # pid -> run id, alive
    started: dict[str, int] = field(default_factory=dict)  # run id -> pid, alive or not
    stopping: bool = False
    exit_code: int = 0

    def __post_init__(self) -> None:
        self._loaded: dict[str, int] = {}
        self._listener: socket.socket | None = None
        self._inode: int | None = None

    def bind(self) -> str:
        """Load the location and listen on the socket; returns its path. What cannot work (the
        folder, a server already there) is refused before the location's slow load."""
        socket_path(self.path)
        private_folder(self.path)
        self._clear_stale_socket()
        warm_up(self.location)
        self._loaded = _package_files(sys.modules)
        if threading.active_count() != 1:
            # A fork copies only this thread; a lock another one holds would stay held.
            names = ", ".join(t.name for t in threading.enumerate())
            raise RuntimeError(f"loading {self.location} started threads ({names}): cannot fork")
        self._clear_stale_socket()
        listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        # Made 0600 from the start (the folder already keeps others out).
        umask = os.umask(0o177)
        try:
            listener.bind(self.path)
        except OSError:
            listener.close()
            raise
        finally:
            os.umask(umask)
        listener.listen(64)
        listener.settimeout(ACCEPT_POLL_S)
        self._listener = listener
        self._inode = os.stat(self.path).st_ino
        return self.path

    def _clear_stale_socket(self) -> None:
        """Removes the socket a killed run server left; refuses to replace a live one, or a
        file that is not a socket."""
        try:
            info = os.lstat(self.path)
        except FileNotFoundError:
            return
        if not stat.S_ISSOCK(info.st_mode):
            raise RunServerError(
                f"{self.path} exists and is not a socket: remove it or choose another"
            )
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
            probe.settimeout(self.request_timeout_s)
            try:
                probe.connect(self.path)
            except (ConnectionRefusedError, FileNotFoundError):
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(self.path)
                return
            except OSError as exc:
                raise RunServerError(f"cannot tell whether {self.path} is in use: {exc}") from None
        raise RunServerError(f"another run server is listening on {self.path}")

    def _remove_socket(self) -> None:
        # Only its own: a server started since on the same path keeps its socket.
        with contextlib.suppress(OSError):
            if os.lstat(self.path).st_ino == self._inode:
                os.unlink(self.path)

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
            "run server of %s listening on %s (pid %s, at most %d runs)",
            self.location, self.path, os.getpid(), self.max_runs,
        )  # fmt: skip
        try:
            while not self.stopping:
                self.reap()
                try:
                    conn, _ = self._listener.accept()
                except (TimeoutError, InterruptedError):
                    continue
                except OSError as exc:  # out of file descriptors: wait, and go on
                    log.warning("run server of %s could not accept: %s", self.location, exc)
                    time.sleep(ACCEPT_POLL_S)
                    continue
                with conn:
                    self._answer(conn)
        finally:
            self._listener.close()
            self._remove_socket()
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
        """One request, answered whatever it is or raises: the loop serves every client, so
        none may stop it or hold it past the request timeout."""
        deadline = time.monotonic() + self.request_timeout_s
        try:
            uid = peer_uid(conn)
            if uid != os.geteuid():
                log.warning("run server of %s refused a request from uid %s", self.location, uid)
                reply: dict[str, object] = {
                    "error": f"refused: uid {uid} is not this run server's user"
                }
            else:
                reply = self.handle(_read_request(conn, deadline))
        except TimeoutError:
            reply = {"error": f"no whole request within {self.request_timeout_s:g} s"}
        except RecursionError:
            reply = {"error": "bad request: nested too deeply"}
        except ValueError as exc:
            reply = {"error": f"bad request: {exc}"}
        except OSError as exc:  # the request cut off, or no fork (no memory, no pids left)
            reply = {"error": f"{type(exc).__name__}: {exc}"}
        except Exception as exc:  # MemoryError or anything else: this request fails, not the loop
            log.exception("run server of %s failed on a request", self.location)
            reply = {"error": f"{type(exc).__name__}: {str(exc)[:200]}"}
        with contextlib.suppress(Exception):
            # The reply is short (the runs are capped): it fits the socket's buffer.
            conn.settimeout(self.request_timeout_s)
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
            if run_id in self.started:
                pid = self.started[run_id]
                state = "running" if pid in self.children else "exited"
                return {
                    "error": f"run {run_id} was started already by this run server "
                    f"(pid {pid}, {state}): a run has one worker"
                }
            if len(self.children) >= self.max_runs:
                return {"error": f"at its cap of live run workers ({MAX_RUNS_ENV}={self.max_runs})"}
            pid = self._fork(run_id)
            self.started[run_id] = pid
            if len(self.started) > REMEMBERED_RUNS:
                del self.started[next(iter(self.started))]
            return {"pid": pid}
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


def _read_request(conn: socket.socket, deadline: float) -> dict[str, object]:
    """One line, whole by `deadline` (not a timeout per read: a byte now and then does not keep
    the connection)."""
    data = b""
    while not data.endswith(b"\n"):
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the request did not arrive in time")
        conn.settimeout(remaining)
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
    """One request to the run server listening on the socket `address` and its reply. Raises
    OSError when it cannot be reached or does not answer within `timeout_s`."""
    socket_path(address)
    started = time.monotonic()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout_s)
        conn.connect(address)
        # Refused before it was read (another user's request): the refusal is there to read.
        with contextlib.suppress(BrokenPipeError):
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
