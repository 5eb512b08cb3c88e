"""What the publishers' API clients share: each request sent exactly once (no client retries:
the publisher decides what is sent again), bounded by a deadline the publisher sets from its
lease, its failures named as the publisher reads them, and URLs trusted only when https, or
http on a loopback address (the local protocol servers).

TikTok's and Instagram's API calls go through httpx (OneShotHttp). A request to an upload
session (YouTube's session requests, TikTok's and Instagram's chunks) goes through `exchange`:
one request that ends by the deadline on the wall clock, however the server paces it. httpx's
timeouts bound each socket operation, so a server that answers a little at a time could keep a
chunk in flight past its holder's lease.

Connections are kept per process, not per request: each provider's httpx client (`http_client`)
and exchange's idle connections by origin, so an upload's chunks share one connection (one TLS
handshake, not one per chunk). A connection idles at most MDAME_HTTP_KEEPALIVE_S and is reused
only while the server has not closed it; one that failed, was cut, or answered an error is
closed, never reused. A forked process starts with none of its parent's (the sockets stay the
parent's), and they are closed at exit (`close_pools`). No client keeps cookies: one client
serves every account the process speaks for.
"""

from __future__ import annotations

import atexit
import contextlib
import http.client
import os
import select
import socket
import ssl
import struct
import threading
import time
from collections.abc import Iterator, Mapping
from http.cookiejar import CookieJar, DefaultCookiePolicy
from typing import Any
from urllib.parse import urlsplit

import httpx

from mdame_core import settings
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
    local = parts.scheme == "http" and loopback(host) and settings.get("ENV") != "prod"
    if not host or not (parts.scheme == "https" or local):
        raise SettingsError(
            f"the {what} {display_url(url)!r} must be an https URL "
            "(or, with ENV=dev, http on a loopback address)"
        )
    return url


# How long a connection may idle before it is closed instead of reused. Servers close idle
# connections after a while (often 60 s or more); one found closed is never reused.
KEEPALIVE_VAR = "MDAME_HTTP_KEEPALIVE_S"
# Idle connections kept per origin (httpx: per client): threads sending at once open more, and
# those beyond this are closed after use.
IDLE_PER_ORIGIN = 4
# The most connections one httpx client opens at once; a request waits for one up to its own
# timeout (PoolTimeout: nothing was sent).
MAX_CONNECTIONS = 16
# The timeout of a request that names none (every call here names its own).
DEFAULT_TIMEOUT_S = 60.0

Origin = tuple[str, str, int]


class _Pools:
    """This process's kept connections: httpx clients by name, exchange's idle connections by
    origin with the time.time() each stops being reused."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.clients: dict[tuple[str, bool], httpx.Client] = {}
        self.idle: dict[Origin, list[tuple[http.client.HTTPConnection, float]]] = {}


_pools = _Pools()


def _forget_after_fork() -> None:
    # The child's sockets are its parent's too: two processes writing requests on one
    # connection would interleave them. The child opens its own; the parent's are left alone
    # (not closed here: the objects are dropped, the parent's connections stay up).
    global _pools
    _pools = _Pools()


os.register_at_fork(after_in_child=_forget_after_fork)


def close_pools() -> None:
    """Closes this process's clients and idle connections (at exit; later requests open new
    ones)."""
    pools = _pools
    with pools.lock:
        clients, pools.clients = list(pools.clients.values()), {}
        idle, pools.idle = [c for kept in pools.idle.values() for c, _ in kept], {}
    for client in clients:
        client.close()
    for conn in idle:
        conn.close()


atexit.register(close_pools)


def _keepalive_s() -> float:
    return float(settings.get(KEEPALIVE_VAR))


def http_client(name: str, trust_env: bool = True) -> httpx.Client:
    """This process's httpx client for `name` (one provider's requests), made on first use with
    explicit pool limits. Each request passes its own timeout. It keeps no cookies."""
    pools = _pools
    with pools.lock:
        client = pools.clients.get((name, trust_env))
        if client is None or client.is_closed:
            client = httpx.Client(
                timeout=DEFAULT_TIMEOUT_S,
                limits=httpx.Limits(
                    max_connections=MAX_CONNECTIONS,
                    max_keepalive_connections=IDLE_PER_ORIGIN,
                    keepalive_expiry=_keepalive_s(),
                ),
                trust_env=trust_env,
                cookies=CookieJar(DefaultCookiePolicy(allowed_domains=[])),
            )
            pools.clients[(name, trust_env)] = client
    return client


def _still_open(conn: http.client.HTTPConnection) -> bool:
    """Whether an idle connection can carry a request: a readable idle socket holds the
    server's close (or bytes nobody asked for), either way not a connection to reuse."""
    sock = conn.sock
    if sock is None:
        return False
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return False
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    try:
        return not poller.poll(0)
    except OSError:
        return False


def _take(origin: Origin) -> http.client.HTTPConnection | None:
    """An idle connection to `origin` still open and within its keep-alive, or None."""
    pools, now = _pools, time.time()
    with pools.lock:
        kept = pools.idle.get(origin, [])
        while kept:
            conn, until = kept.pop()
            if now < until and _still_open(conn):
                return conn
            conn.close()
    return None


def _give(origin: Origin, conn: http.client.HTTPConnection) -> None:
    """`conn`, its answer read whole, kept for the next request to `origin`."""
    pools, now = _pools, time.time()
    with pools.lock:
        for other, kept in pools.idle.items():  # expired ones elsewhere go now
            if other != origin:
                for stale in [c for c, until in kept if until <= now]:
                    stale.close()
                kept[:] = [(c, until) for c, until in kept if until > now]
        kept = pools.idle.setdefault(origin, [])
        if len(kept) < IDLE_PER_ORIGIN:
            kept.append((conn, now + _keepalive_s()))
            return
    conn.close()


class OneShotHttp:
    """Requests sent once each, ending by `deadline` (a time.time() value, or None), through
    this process's httpx client named `client_name`."""

    client_name = "api"

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
        timeout = self._timeout()
        try:
            return http_client(self.client_name).request(method, url, timeout=timeout, **kwargs)
        except (httpx.ConnectError, httpx.PoolTimeout) as exc:
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
        self._lock = threading.Lock()
        self._stopped = False
        self._timer: threading.Timer | None = None
        if deadline is not None:
            self._timer = threading.Timer(max(0.0, deadline - time.time()), self._cut)
            self._timer.daemon = True
            self._timer.start()

    def _cut(self) -> None:
        with self._lock:
            if self._stopped:
                return
            self.fired = True
            sock = self._conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        """Once it returns, the connection is not cut any more (it may be kept for reuse):
        `fired` says whether it was."""
        with self._lock:
            self._stopped = True
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
    """One HTTP request, never re-sent: (status, headers, body). It goes on an idle connection
    to the URL's origin when one is kept (see the module), else on a new one.

    It ends by `deadline` (time.time(); None: each socket operation is bounded by `timeout_s`
    only). NotSent when it cannot start before the deadline or no connection is made (the
    server saw nothing); TransferInterrupted when it fails or is cut once bytes went out (on a
    kept connection too: one the server closed just as the request went is not told apart)."""
    parts = urlsplit(url)
    try:
        first = _time_left(deadline, timeout_s)
    except _Cut:
        raise NotSent(f"{what}: not started, its deadline had passed") from None
    https = parts.scheme == "https"
    host = (parts.hostname or "").lower()
    origin = (parts.scheme, host, parts.port or (443 if https else 80))
    conn = _take(origin)
    if conn is not None and conn.sock is not None:
        conn.sock.settimeout(first)
    else:
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
    keep = False
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
        # An error answer may come before the server read the whole body: not reused.
        keep = conn.sock is not None and not resp.will_close and status < 400
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
        if keep:
            _give(origin, conn)
        else:
            conn.close()
