"""What the local protocol servers share: a queue of faults pushed by tests, a state kept as
one JSON file (request bodies in files beside it) that survives a restart, and the HTTP
lifecycle on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Self

# Set by a test that searches logs and events for leaked credentials: every secret a server
# hands out (access, refresh and upload tokens, consent codes, upload session ids) then carries
# this mark, so one substring finds any of them. Letters and digits only (the servers reshape
# some tokens' '-' and '_').
SECRET_MARK_VAR = "MDAME_FAKES_SECRET_MARK"


def secret_mark() -> str:
    return os.environ.get(SECRET_MARK_VAR, "")


def new_secret(prefix: str, nbytes: int) -> str:
    """A credential the server hands out: `prefix`, the secret mark (when set), random bytes."""
    return prefix + secret_mark() + secrets.token_urlsafe(nbytes)


class FaultQueue:
    """Faults in the order pushed. `known` maps each fault to the kind of request it fires on
    ("any": every request, or the one named by the fault's `on` option)."""

    def __init__(self, known: Mapping[str, str]) -> None:
        self.known = known
        self._lock = threading.Lock()
        self._items: list[dict[str, Any]] = []

    def push(self, fault: str, **options: Any) -> None:
        if fault not in self.known:
            raise ValueError(f"unknown fault {fault!r}; known: {', '.join(self.known)}")
        with self._lock:
            self._items.append({"fault": fault, **options})

    def pop_first(self, fires: Callable[[dict[str, Any]], bool]) -> dict[str, Any] | None:
        """Removes and returns the first queued fault that `fires` accepts."""
        with self._lock:
            for i, item in enumerate(self._items):
                if fires(item):
                    return self._items.pop(i)
        return None

    def pending(self) -> list[dict[str, Any]]:
        with self._lock:
            return [dict(i) for i in self._items]

    def clear(self) -> None:
        with self._lock:
            self._items.clear()


class NamedFaults(FaultQueue):
    """A queue whose requests name the faults they can fire."""

    def take(self, *faults: str, request: str = "") -> dict[str, Any] | None:
        """The first fault among `faults`, or one for any request (its `on` option, when set,
        naming `request`)."""

        def fires(item: dict[str, Any]) -> bool:
            if self.known[item["fault"]] == "any" and item.get("on") in (None, request):
                return True
            return item["fault"] in faults

        return self.pop_first(fires)


@dataclass
class JsonState:
    """Everything a fake remembers, saved as one JSON file; bytes in `bytes/` beside it.
    Subclasses fill in their keys in `defaults`."""

    folder: Path
    data: dict[str, Any] = field(default_factory=dict)
    lock: threading.RLock = field(default_factory=threading.RLock)

    @property
    def file(self) -> Path:
        return self.folder / "state.json"

    def load(self) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        (self.folder / "bytes").mkdir(exist_ok=True)
        if self.file.exists():
            self.data = json.loads(self.file.read_text())
        self.defaults()

    def defaults(self) -> None:
        """Sets what a fresh (or older) state lacks."""

    def save(self) -> None:
        tmp = self.file.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True))
        os.replace(tmp, self.file)


class TrackedHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server that counts the connections it accepts and, on `stop`, closes
    the kept-alive ones too, as a real server going down does: otherwise a client's idle
    connection would still be answered by the stopped server's handler thread."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], handler: type[BaseHTTPRequestHandler]) -> None:
        super().__init__(address, handler)
        self.accepted = 0
        self._open: set[Any] = set()
        self._conn_lock = threading.Lock()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._conn_lock:
            self.accepted += 1
            self._open.add(request)
        super().process_request(request, client_address)

    def shutdown_request(self, request: Any) -> None:
        with self._conn_lock:
            self._open.discard(request)
        super().shutdown_request(request)

    def stop(self) -> None:
        self.shutdown()
        self.server_close()
        with self._conn_lock:
            held, self._open = list(self._open), set()
        for sock in held:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class LocalServer:
    """A fake's HTTP lifecycle on its host and port: its handler class gets the fake as
    `fake`; a restart reloads the state from its folder and listens on the same port."""

    state: JsonState
    # How often the serving thread looks for stop(): every test's teardown waits this long.
    POLL_S = 0.02

    def __init__(self, host: str, port: int) -> None:
        self._host, self._port = host, port
        self._httpd: TrackedHTTPServer | None = None
        self._earlier = 0  # connections the servers before a restart accepted

    def handler(self) -> type[BaseHTTPRequestHandler]:
        """The request handler class (defined after the fake in its module)."""
        raise NotImplementedError

    @property
    def connections(self) -> int:
        """TCP connections accepted since this fake was made (across restarts): a test reads
        how many a client opened, so that it can tell connections reused from new ones."""
        return self._earlier + (self._httpd.accepted if self._httpd is not None else 0)

    def start(self) -> Self:
        handler = type("Handler", (self.handler(),), {"fake": self})
        self._httpd = httpd = TrackedHTTPServer((self._host, self._port), handler)
        self._port = httpd.server_address[1]  # keep the port across a restart
        serve = httpd.serve_forever
        threading.Thread(target=serve, kwargs={"poll_interval": self.POLL_S}, daemon=True).start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.stop()
            self._earlier += self._httpd.accepted
            self._httpd = None

    def restart(self) -> None:
        """Stops, reloads the state from its folder and listens on the same port again."""
        self.stop()
        self.state = type(self.state)(self.state.folder)
        self.state.load()
        self.start()

    @property
    def base_url(self) -> str:
        return f"http://{self._host}:{self._port}/"

    def serve_until_interrupted(self, banner: str) -> None:
        """Standalone (`python -m fakes.<name>`): serves, says `banner`, stops on Ctrl-C."""
        self.start()
        print(banner.format(base_url=self.base_url), flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            self.stop()


@contextlib.contextmanager
def serving(fake: LocalServer) -> Iterator[Any]:
    """`fake` started for the duration of the block."""
    fake.start()
    try:
        yield fake
    finally:
        fake.stop()


class Drop(Exception):
    """Close the connection without an answer (a reset when `reset`)."""

    def __init__(self, reset: bool = False) -> None:
        super().__init__("drop")
        self.reset = reset


class JsonHandler(BaseHTTPRequestHandler):
    """The request plumbing the fakes share: keep-alive HTTP/1.1, JSON answers, dropped
    connections, and every method handed to `_dispatch`."""

    protocol_version = "HTTP/1.1"
    # Headers and body go out in two writes: without this, Nagle's algorithm and the client's
    # delayed ACK hold each keep-alive answer back ~40 ms (a TikTok fake test file went from
    # 25 s to 7 s with it).
    disable_nagle_algorithm = True

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        return  # quiet: tests read the state, not stderr

    def _dispatch(self, method: str) -> None:
        raise NotImplementedError

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch("GET")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch("POST")

    def do_PUT(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch("PUT")

    def do_DELETE(self) -> None:  # noqa: N802 - stdlib name
        self._dispatch("DELETE")

    def _send(self, status: int, body: Any = None, headers: dict[str, str] | None = None) -> None:
        raw = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if body is not None:
            self.send_header("Content-Type", "application/json; charset=UTF-8")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _drop(self, reset: bool = False) -> None:
        if reset:  # RST instead of FIN: the client sees a connection reset
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.connection.close()


def store_demo_grant(state: Any, env: str, account: Any, token: str) -> None:
    """Demo wiring: `account`'s grant (a refresh token the local server honours) sealed and
    stored, as `mdame accounts connect` would after a consent. The master key comes from
    MDAME_MASTER_KEY or the key file (created, 0600, when neither exists)."""
    from mdame_core.settings import mdame_home
    from mdame_domain.credentials import (
        MASTER_KEY_FILE_VAR,
        MASTER_KEY_VAR,
        MasterKey,
        associated_data,
        load_master_key,
        seal_grant,
        write_key_file,
    )

    path = Path(os.environ.get(MASTER_KEY_FILE_VAR) or mdame_home() / "master.key")
    if not os.environ.get(MASTER_KEY_VAR) and not path.exists():
        write_key_file(path, MasterKey.generate())
    envelope = seal_grant(
        load_master_key(path),
        associated_data(env, account.key_platform, account.handle),
        {"refresh_token": token},
    )
    state.store_account_credential(
        account.id, envelope.key_id, envelope.wrapped_key, envelope.ciphertext
    )
