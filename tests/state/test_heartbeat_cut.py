"""A heartbeat cut by a connection drop stops the step before its next side effect.

The state client reaches PostgreSQL through a TCP proxy that the test cuts (every connection
dropped, new ones refused), as a network partition would. The holder's heartbeat cannot renew
its lease; once the lease would have run out the fence is lost, and the step's next call or
side effect is refused on this side, before anything is sent. Meanwhile another holder takes the
lock over, and when the network comes back the old holder's writes are refused by the database.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from psycopg.types.json import Jsonb

from mdame_core.state import Fenced, FenceLost, StateStore
from mdame_pipeline.locks import held_lock
from tests.adminkit import as_admin


class CuttableProxy:
    """Forwards TCP to PostgreSQL until cut(); then drops every link and refuses new ones."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.upstream = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = self._listener.getsockname()[1]
        self._links: list[tuple[socket.socket, socket.socket]] = []
        self._guard = threading.Lock()
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, url: str) -> str:
        parts = urlsplit(url)
        netloc = f"{parts.username}@127.0.0.1:{self.port}"
        return urlunsplit(parts._replace(netloc=netloc, query="sslmode=disable"))

    def cut(self) -> None:
        with self._guard:
            self.open = False
            links, self._links = self._links, []
        for pair in links:
            for end in pair:
                with contextlib.suppress(OSError):
                    end.shutdown(socket.SHUT_RDWR)
                    end.close()

    def heal(self) -> None:
        self.open = True

    def close(self) -> None:
        self.cut()
        with contextlib.suppress(OSError):
            self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self.open:
                client.close()
                continue
            server = socket.create_connection(self.upstream)
            with self._guard:
                self._links.append((client, server))
            for a, b in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                sink.sendall(data)
        for end in (source, sink):
            with contextlib.suppress(OSError):
                end.close()


@pytest.fixture
def proxy(fresh_db) -> Any:
    p = CuttableProxy(fresh_db.app)
    yield p
    p.close()


def test_a_cut_heartbeat_stops_the_step_before_its_next_side_effect(
    fresh_db, proxy, monkeypatch
) -> None:
    monkeypatch.setenv("MDAME_LOCK_TTL_S", "2")
    side_effects: list[str] = []
    with StateStore(fresh_db.app, env="dev") as direct:
        as_admin(direct).upsert_dimension("tech", "Tech")
        with StateStore(proxy.url(fresh_db.app), env="dev", connect_timeout_s=2) as remote:
            with pytest.raises(FenceLost), held_lock(remote, "tech", "run-a") as fenced:
                fence = fenced.fence
                fenced.get_dimension("tech")  # works while the network does
                side_effects.append("before the cut")
                proxy.cut()
                deadline = time.monotonic() + 10
                while fence.lost is None and time.monotonic() < deadline:
                    time.sleep(0.05)
                assert fence.lost is not None, "the fence outlived its lease"
                # What a stage does before a side effect: refused, nothing sent.
                fence.check()
                side_effects.append("after the cut")  # never reached
            assert side_effects == ["before the cut"]
            token, secret = fence.token, fence.secret
            # The lease ran out on the server too: another holder takes over ...
            taken = direct.acquire_pipeline_lock("pipeline:tech", "run-b", 60)
            assert taken is not None and taken.token > token
            # ... and the old holder's writes are refused by the database, whatever the path.
            proxy.heal()
            with pytest.raises(Fenced):
                direct.call(
                    "log_safety_decision",
                    *("topic", "k", "tech", "allow", "r", Jsonb([]), "c", secret),
                )
