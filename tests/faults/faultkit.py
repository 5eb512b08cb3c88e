"""What the fault tests share: child processes, stand-ins for external services (a publisher
that times out, a network that loses a reply, a GPU that hangs), seeding, and read-only probes.

Nothing here replaces our own code: the pipeline, the state store and the RPCs run for real.
`python tests/faults/faultkit.py blocked-worker ...` is the hanging GPU worker of the worker test.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import psycopg

from mdame_core.state import Account, StateStore
from mdame_domain.channel import ChannelApi, SessionState, TransferInterrupted
from mdame_domain.outbox import OutboxChannel
from mdame_pipeline.lifecycle import script_states
from mdame_pipeline.locks import held_lock
from mdame_resources.providers.publisher import OutboxPublisher
from mdame_resources.providers.visuals import VisualsResource
from mdame_resources.state import StateStoreResource
from tests.adminkit import admin_connect, as_admin
from tests.childenv import child_environ

DAY = date(2026, 11, 29)
DIMENSION = "science"
KEY = f"{DAY.isoformat()}|{DIMENSION}"
REPO = Path(__file__).resolve().parents[2]
PYTHON = sys.executable


# ------------------------------------------------------------------------------------------
# Waiting
# ------------------------------------------------------------------------------------------
def wait_for(what: str, ready: Callable[[], Any], timeout: float = 60.0, every: float = 0.05):
    """Polls `ready` until it returns something truthy; fails naming `what` after timeout."""
    deadline = time.monotonic() + timeout
    while True:
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


# ------------------------------------------------------------------------------------------
# Child processes: a whole partition run, as a cron tick starts one
# ------------------------------------------------------------------------------------------
def child_env(owner_url: str, app_url: str, home: Path, **extra: str) -> dict[str, str]:
    env = child_environ()
    env.update(
        ENV="dev",
        MDAME_DATABASE_URL=owner_url,
        MDAME_APP_DATABASE_URL=app_url,
        MDAME_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    (home / "dagster").mkdir(parents=True, exist_ok=True)
    return env


@dataclass
class PartitionRun:
    """`python -m tests.chaos.child KEY`: the partition's three jobs in one process."""

    proc: subprocess.Popen
    log: Path

    @classmethod
    def start(cls, env: Mapping[str, str], log: Path, key: str = KEY) -> PartitionRun:
        out = open(log, "wb")  # noqa: SIM115 - the child owns it; closed in wait()
        proc = subprocess.Popen(
            [PYTHON, "-m", "tests.chaos.child", key],
            cwd=REPO,
            env=dict(env),
            stdout=out,
            stderr=subprocess.STDOUT,
        )
        out.close()
        return cls(proc, log)

    def wait(self, timeout: float = 300.0) -> dict[str, Any]:
        """The run's outcome (run_partition's Outcome as a dict, plus the exit code)."""
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise AssertionError(f"partition run timed out; log:\n{self.tail()}") from None
        for line in reversed(self.log.read_text(errors="replace").splitlines()):
            if line.startswith('{"partition_key"'):
                return {**json.loads(line), "exitcode": code}
        raise AssertionError(f"partition run exited {code} without an outcome:\n{self.tail()}")

    def tail(self, lines: int = 30) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


# ------------------------------------------------------------------------------------------
# Reads (as the app role or the superuser; never writes)
# ------------------------------------------------------------------------------------------
def rows(url: str, query: str, args: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, args).fetchall()


def table_fingerprints(app_url: str) -> dict[str, tuple[int, str]]:
    """Row count and a digest of every row of every mdame table. The run's own bookkeeping
    (its run record, the lock row, lock and run events) is left out: a rerun adds to it."""
    bookkeeping = {"pipeline_runs", "system_locks", "events"}
    with admin_connect(app_url, autocommit=True) as conn:  # every column, the session URIs too
        tables = [
            t
            for (t,) in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'mdame' ORDER BY 1"
            ).fetchall()
            if t not in bookkeeping
        ]
        digest = "count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), ''))"
        found = {t: conn.execute(f'SELECT {digest} FROM mdame."{t}" t').fetchone() for t in tables}
        found["events (work)"] = conn.execute(
            f"SELECT {digest} FROM mdame.events t "
            "WHERE subject_kind NOT IN ('lock', 'pipeline_run')"
        ).fetchone()
    return found


def file_fingerprints(*roots: Path) -> dict[str, tuple[int, int]]:
    """Every file under the roots: size and modification time (a rewrite changes the latter)."""
    return {
        str(p): (p.stat().st_size, p.stat().st_mtime_ns)
        for root in roots
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def terminate_when_blocked(
    su_url: str, dbname: str, rpc: str, timeout: float = 60.0
) -> threading.Thread:
    """A thread that waits until a backend of `dbname` is blocked on a lock inside `rpc`, then
    kills it with pg_terminate_backend (the connection dies mid-RPC). `.killed` holds the pid."""

    def run() -> None:
        def blocked() -> int | None:
            found = rows(
                su_url,
                """SELECT pid FROM pg_stat_activity
                    WHERE datname = %s AND wait_event_type = 'Lock' AND query LIKE %s""",
                (dbname, f"%mdame.{rpc}(%"),
            )
            return found[0][0] if found else None

        pid = wait_for(f"a backend blocked in {rpc}", blocked, timeout)
        rows(su_url, "SELECT pg_terminate_backend(%s)", (pid,))
        thread.killed = pid  # type: ignore[attr-defined]

    thread = threading.Thread(target=run, daemon=True, name=f"terminate:{rpc}")
    thread.killed = None  # type: ignore[attr-defined]
    thread.start()
    return thread


# ------------------------------------------------------------------------------------------
# Stand-ins for external services
# ------------------------------------------------------------------------------------------
CALLS: list[tuple[str, str]] = []  # (method, dimension) of every channel call, in order


class _RecordingChannel(OutboxChannel):
    """The outbox channel, recording each call (did a rerun ask, or submit again?); `fault`
    decides what happens to the chunk that completes the upload."""

    def __init__(self, root: Path, dimension_slug: str, fault: str = "") -> None:
        super().__init__(root, dimension_slug)
        self.fault = fault

    def initiate(self, body: dict, notify_subscribers: bool, size: int, mime: str) -> str:
        CALLS.append(("initiate", self.dimension_slug))
        return super().initiate(body, notify_subscribers, size, mime)

    def send_chunk(self, session_uri: str, data: bytes, start: int, size: int) -> SessionState:
        CALLS.append(("send_chunk", self.dimension_slug))
        last = start + len(data) == size
        if last and self.fault == "lost":
            # The request never reached a live session: the channel forgot it with its bytes.
            shutil.rmtree(Path(urlsplit(session_uri).path), ignore_errors=True)
            raise TransferInterrupted("PUT: TimeoutError (upload sent, no answer in time)")
        answer = super().send_chunk(session_uri, data, start, size)
        if last and self.fault == "published":
            raise TransferInterrupted("PUT: TimeoutError (upload sent, no answer in time)")
        return answer

    def query(self, session_uri: str, size: int) -> SessionState:
        CALLS.append(("query", self.dimension_slug))
        return super().query(session_uri, size)

    def uploads_playlist(self) -> str:
        CALLS.append(("search", self.dimension_slug))
        return super().uploads_playlist()


class RecordingOutbox(OutboxPublisher):
    """The offline publisher over a recording channel."""

    fault: str = ""

    def channel(self, state: StateStore, account: Account, dimension_slug: str) -> ChannelApi:
        return _RecordingChannel(self.folder(), dimension_slug, self.fault)


class PublishedThenTimeout(RecordingOutbox):
    """The upload goes through, the answer never comes: the UNKNOWN outcome."""

    fault: str = "published"


class LostThenTimeout(RecordingOutbox):
    """The last chunk never reaches a live session and the client times out: also UNKNOWN."""

    fault: str = "lost"


class HangingVisuals(VisualsResource):
    """A GPU job that never finishes (until the worker process is killed)."""

    marker: str

    def generate(
        self,
        scene_hash: str,
        prompt: str,
        palette: Sequence[str],
        duration_s: float,
        out: Path,
        engine: str | None = None,
    ) -> Path:
        Path(self.marker).write_text(f"{os.getpid()} {scene_hash}\n")
        time.sleep(3600)
        raise AssertionError("unreachable: the test kills this worker")


_short_clients: dict[tuple[int, str, int], StateStore] = {}


class ShortTimeoutState(StateStoreResource):
    """The real state-store client with a short statement timeout (the resource has no
    setting for it; production keeps 30 s)."""

    statement_timeout_ms: int = 1000

    def get_client(self) -> StateStore:
        key = (os.getpid(), self.database_url, self.statement_timeout_ms)
        if key not in _short_clients:
            _short_clients[key] = StateStore(
                self.database_url, statement_timeout_ms=self.statement_timeout_ms
            )
        return _short_clients[key]


def close_short_clients() -> None:
    for key in [k for k in _short_clients if k[0] == os.getpid()]:
        _short_clients.pop(key).close()


class ReplyDropper:
    """A TCP proxy in front of PostgreSQL standing in for a network that fails at the worst
    moment. Once armed for an RPC, it lets that RPC's statement reach the server and commit,
    swallows the server's reply and cuts the client off: the transaction is committed, the
    client only sees a lost connection. One shot; `fired` says whether it happened."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._armed: bytes | None = None
        self._lock = threading.Lock()
        self.fired = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name="reply-dropper").start()

    def url(self, url: str) -> str:
        """`url` through the proxy (no TLS, so the proxy can read the protocol)."""
        parts = urlsplit(url)
        netloc = f"{parts.username}@127.0.0.1:{self.port}" if parts.username else None
        query = "&".join(q for q in (parts.query, "sslmode=disable") if q)
        return urlunsplit(parts._replace(netloc=netloc or f"127.0.0.1:{self.port}", query=query))

    def arm(self, rpc: str) -> None:
        self._armed = f"mdame.{rpc}(".encode()

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.upstream)
            link = {"client": client, "server": server, "target": False}
            for pump in (self._upstream, self._downstream):
                threading.Thread(target=pump, args=(link,), daemon=True).start()

    def _upstream(self, link: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            while data := link["client"].recv(65536):
                armed = self._armed
                if armed and armed in data:
                    link["target"] = True  # this connection runs the RPC; its COMMIT is next
                link["server"].sendall(data)
        _close(link)

    def _downstream(self, link: dict[str, Any]) -> None:
        with contextlib.suppress(OSError):
            while data := link["server"].recv(65536):
                # Each RPC is one autocommit statement: the server commits it before it sends
                # ReadyForQuery (idle), so a reply holding that message follows the commit.
                if link["target"] and _READY_IDLE in data and self._take():
                    _close(link)  # committed on the server; the reply is lost
                    self.fired.set()
                    return
                link["client"].sendall(data)
        _close(link)

    def _take(self) -> bool:
        with self._lock:
            armed, self._armed = self._armed, None
            return armed is not None


# ReadyForQuery, transaction status idle: 'Z', length 5, 'I'.
_READY_IDLE = b"Z\x00\x00\x00\x05I"


def _close(link: dict[str, Any]) -> None:
    for end in ("client", "server"):
        with contextlib.suppress(OSError):
            link[end].shutdown(socket.SHUT_RDWR)
        with contextlib.suppress(OSError):
            link[end].close()


# ------------------------------------------------------------------------------------------
# Seeding (through the RPCs, under a held pipeline lock) and aging (as the owner, as the TTL
# tests do)
# ------------------------------------------------------------------------------------------
@contextlib.contextmanager
def seeding(state: StateStore, slug: str = DIMENSION) -> Iterator[StateStore]:
    """The dimension's pipeline lock for the block, as a run's step holds it: yields the fenced
    store that the seeding helpers write with, and releases the lock afterwards."""
    with held_lock(state, slug, f"faults-seed:{os.getpid()}") as fenced:
        yield fenced


def seed_dimension(state: StateStore, slug: str = DIMENSION) -> tuple[int, int]:
    """A dimension and its one outbox account; returns (dimension id, account id)."""
    dimension_id = as_admin(state).upsert_dimension(slug, slug.title(), {})
    account_id = as_admin(state).upsert_dimension_account(
        slug, "youtube", f"{slug}-account", 10_000
    )
    return dimension_id, account_id


def seed_script(
    fenced: StateStore, dimension_id: int, name: str, to_state: str, attempts: int = 0
) -> int:
    """A topic and its script, walked through the real transitions up to `to_state`; written
    with `fenced`, a store holding the dimension's lock (see `seeding`)."""
    base = {"dimension_id": dimension_id, "partition_date": DAY.isoformat()}
    topic = fenced.upsert_work_unit("topic", f"topic:{name}", {**base, "title": name})
    script = fenced.upsert_work_unit("script", f"script:{name}", {**base, "topic_id": topic})
    path = script_states(fenced, "drafted", to_state)
    for src, dst in zip(path, path[1:], strict=False):
        fenced.transition("script", script, src, dst)
    for _ in range(attempts):
        fenced.bump_work_attempt("script", script, {"seeded": True})
    return script


def age(owner_url: str, table: str, unit_id: int, seconds: float) -> None:
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(
            f'UPDATE mdame."{table}" SET updated_at = now() - make_interval(secs => %s) '
            "WHERE id = %s",
            (seconds, unit_id),
        )


def end_attempt_leases(owner_url: str, work_key: str) -> None:
    """The submitting holder's lease on the key's attempts has run out (as once a crashed run's
    lock expired and its last request ended): another holder may now settle them."""
    with psycopg.connect(owner_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE mdame.provider_attempts SET lease_expires_at = now() - interval '1 second' "
            "WHERE work_key = %s",
            (work_key,),
        )


@contextlib.contextmanager
def owner_transaction(owner_url: str) -> Iterator[psycopg.Connection]:
    """An open transaction as the owner: its row locks block the RPCs until it ends."""
    with psycopg.connect(owner_url) as conn:
        yield conn
        conn.commit()


# ------------------------------------------------------------------------------------------
# The hanging worker (a child process of the worker test)
# ------------------------------------------------------------------------------------------
def _blocked_worker(app_url: str, media: str, scratch: str, marker: str, scene_id: str) -> None:
    """One scene's scene_clip step body on another host, whose GPU hangs mid-clip."""
    from mdame_domain.media_store import LocalMediaStore
    from mdame_pipeline.clip_worker import make_scene_clip

    state = StateStore(app_url, env="dev")
    make_scene_clip(
        state,
        int(scene_id),
        HangingVisuals(marker=marker),
        LocalMediaStore(Path(media)),
        Path(scratch),
    )


def start_blocked_worker(env: Mapping[str, str], *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [PYTHON, __file__, "blocked-worker", *args],
        cwd=REPO,
        env={**env, "PYTHONPATH": str(REPO)},  # this checkout's code, whatever is installed
        start_new_session=True,
    )


def kill9(proc: subprocess.Popen) -> None:
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(30)


if __name__ == "__main__" and sys.argv[1:2] == ["blocked-worker"]:
    _blocked_worker(*sys.argv[2:7])
