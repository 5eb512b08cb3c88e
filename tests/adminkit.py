"""Operator-side clients for tests: the registry, budget caps, quota and budget ledgers, channel
grants and the job queue are the admin role's (0025), so tests that seed them use an admin
client on the same database as the app client under test."""

from __future__ import annotations

import threading
from urllib.parse import urlsplit, urlunsplit

import psycopg

from mdame_core import settings
from mdame_core.state import StateStore

_lock = threading.Lock()
_clients: dict[str, StateStore] = {}


def admin_url(url: str) -> str:
    """The owner login for the database `url` points at (the owner may act as admin)."""
    parts = urlsplit(url)
    netloc = f"{settings.OWNER_ROLE}@{parts.hostname}:{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def admin_of(state_or_url: StateStore | str) -> StateStore:
    """An admin client on the database of `state_or_url` (an app client or a URL), one per
    database, closed by close_admins when the database is dropped."""
    url = state_or_url if isinstance(state_or_url, str) else state_or_url.url
    url = admin_url(url)
    with _lock:
        client = _clients.get(url)
        if client is None:
            client = _clients[url] = StateStore(url, role="admin", env="dev", pool_max=2)
        return client


def close_admins(dbname: str) -> None:
    """Closes the admin clients of `dbname` (before it is dropped)."""
    with _lock:
        doomed = [u for u in _clients if urlsplit(u).path.lstrip("/") == dbname]
        clients = [_clients.pop(u) for u in doomed]
    for client in clients:
        client.close()


def as_admin(state: StateStore) -> StateStore:
    """admin_of(state), writing under the same fence when `state` is a fenced view."""
    admin = admin_of(state)
    return admin if state.fence is None else admin.fenced(state.fence)


def admin_connect(url: str, *, autocommit: bool = False) -> psycopg.Connection:
    """A plain connection acting as the admin role on the database of `url` (raw SQL setup:
    bulk enqueues, transactions held open on purpose)."""
    conn = psycopg.connect(admin_url(url), autocommit=autocommit)
    conn.execute(f"SET ROLE {settings.ADMIN_ROLE}")
    if not autocommit:
        conn.commit()  # the role stays; the test's own transaction starts after it
    return conn
