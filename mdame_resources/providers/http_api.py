"""What the publishers' API clients share: each request sent exactly once (no client retries:
the publisher decides what is sent again), bounded by a deadline the publisher sets from its
lease, its failures named as the publisher reads them, and URLs trusted only when https, or
http on a loopback address (the local protocol servers).

TikTok's and Instagram's API calls go through httpx (OneShotHttp). A request to an upload
session (YouTube's session requests, TikTok's and Instagram's chunks) goes through `exchange`:
one request on a fresh connection that ends by the deadline on the wall clock, however the
server paces it. httpx's timeouts bound each socket operation, so a server that answers a
little at a time could keep a chunk in flight past its holder's lease.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import urlsplit

import httpx

from mdame_core.settings import SettingsError
from mdame_domain.channel import NotSent, TransferInterrupted
from mdame_domain.redaction import display_url


def loopback(host: str) -> bool:
    return host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


def trusted(url: str, what: str) -> str:
    """`url` when it may carry a token: https, or http on a loopback address (the local
    protocol servers) but not with ENV=prod. The refusal names the URL without its query."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    local = parts.scheme == "http" and loopback(host) and os.environ.get("ENV") != "prod"
    if not host or not (parts.scheme == "https" or local):
        raise SettingsError(
            f"the {what} {display_url(url)!r} must be an https URL "
            "(or, with ENV=dev, http on a loopback address)"
        )
    return url


class OneShotHttp:
    """Requests sent once each, ending by `deadline` (a time.time() value, or None)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.deadline: float | None = None

    def _timeout(self) -> float:
        left = self.timeout_s
        if self.deadline is not None:
            left = min(left, self.deadline - time.time())
        if left <= 0:
            raise NotSent("the request could not start before its deadline")
        return left

    def _send(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        """One request, sent once. A connection never made is NotSent; a request cut short,
        or one whose answer was lost, is TransferInterrupted."""
        try:
            with httpx.Client(timeout=self._timeout()) as client:
                return client.request(method, url, **kwargs)
        except httpx.ConnectError as exc:
            raise NotSent(f"{what}: no connection ({type(exc).__name__})") from None
        except (httpx.TransportError, httpx.StreamError) as exc:
            raise TransferInterrupted(f"{what}: no answer ({type(exc).__name__})") from None


# A request body goes out in blocks of this size, the deadline checked before each one.
SEND_BLOCK = 64 * 1024


class _Cut(Exception):
    """The request's deadline came while it was still in flight."""


def _time_left(deadline: float | None, timeout_s: float) -> float:
    """The timeout of the next socket operation: `timeout_s`, or less when the deadline is
    nearer. _Cut once it has passed."""
    if deadline is None:
        return timeout_s
    left = deadline - time.time()
    if left <= 0:
        raise _Cut
    return min(timeout_s, left)


def _reset(conn: http.client.HTTPConnection) -> None:
    """Closes with a reset: what the kernel still holds for the peer is dropped, not sent."""
    if conn.sock is not None:
        with contextlib.suppress(OSError):
            conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    conn.close()


class _Watchdog:
    """Shuts the connection's socket down at the deadline, whatever the request is doing:
    socket timeouts bound one operation each, and a server that sends its answer a byte at a
    time never lets one of them expire."""

    def __init__(self, conn: http.client.HTTPConnection, deadline: float | None) -> None:
        self.fired = False
        self._conn = conn
        self._timer: threading.Timer | None = None
        if deadline is not None:
            self._timer = threading.Timer(max(0.0, deadline - time.time()), self._cut)
            self._timer.daemon = True
            self._timer.start()

    def _cut(self) -> None:
        self.fired = True
        sock = self._conn.sock
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


def exchange(
    method: str,
    url: str,
    body: bytes,
    headers: Mapping[str, str],
    deadline: float | None,
    timeout_s: float,
    what: str,
) -> tuple[int, http.client.HTTPMessage, bytes]:
    """One HTTP request on a fresh connection, never re-sent: (status, headers, body).

    It ends by `deadline` (time.time(); None: each socket operation is bounded by `timeout_s`
    only). NotSent when it cannot start before the deadline or no connection is made (the
    server saw nothing); TransferInterrupted when it fails or is cut once bytes went out."""
    parts = urlsplit(url)
    try:
        first = _time_left(deadline, timeout_s)
    except _Cut:
        raise NotSent(f"{what}: not started, its deadline had passed") from None
    https = parts.scheme == "https"
    conn_type = http.client.HTTPSConnection if https else http.client.HTTPConnection
    conn = conn_type(parts.hostname or "", parts.port, timeout=first)
    try:
        conn.connect()
    except (OSError, http.client.HTTPException) as exc:
        conn.close()
        raise NotSent(f"{what}: no connection ({type(exc).__name__})") from None

    def blocks() -> Iterator[bytes]:
        for start in range(0, len(body), SEND_BLOCK):
            assert conn.sock is not None
            conn.sock.settimeout(_time_left(deadline, timeout_s))
            yield body[start : start + SEND_BLOCK]

    sent = {k: v for k, v in headers.items() if k.lower() not in ("content-length", "host")}
    watchdog = _Watchdog(conn, deadline)
    try:
        conn.request(
            method,
            (parts.path or "/") + (f"?{parts.query}" if parts.query else ""),
            body=blocks(),
            headers={**sent, "Content-Length": str(len(body))},
        )
        assert conn.sock is not None
        conn.sock.settimeout(_time_left(deadline, timeout_s))
        resp = conn.getresponse()
        status, got, content = resp.status, resp.headers, resp.read()
        watchdog.stop()
        if watchdog.fired:  # an answer cut short can read as a whole one: it is not one
            raise _Cut
        return status, got, content
    except _Cut:
        _reset(conn)
        raise TransferInterrupted(f"{what}: cut at its deadline") from None
    except (OSError, http.client.HTTPException) as exc:
        _reset(conn)
        late = watchdog.fired or (deadline is not None and time.time() >= deadline)
        why = "cut at its deadline" if late else type(exc).__name__
        raise TransferInterrupted(f"{what}: {why}") from None
    finally:
        watchdog.stop()
        conn.close()
