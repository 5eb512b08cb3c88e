"""The state store as a Dagster resource: one pooled StateStore client per process."""

from __future__ import annotations

import os
import threading

import dagster as dg

from mdame_core import settings
from mdame_core.state import StateStore

# One client (and so one pool) per process and configuration: Dagster builds a resource per
# step, and a pool per step would open connections faster than it closes them. The pid is part
# of the key because a pool must never be shared across a fork.
_clients: dict[tuple[int, str, int], StateStore] = {}
_lock = threading.Lock()

# The most connections one process's client holds at once. A setting of the process, not of the
# definitions: each kind of process (code server, run worker, Celery worker) gets its own from
# its environment, and docs/deployment.md sizes PostgreSQL's max_connections with it.
POOL_MAX_ENV = "MDAME_STATE_POOL_MAX"


def pool_max_setting() -> int:
    """MDAME_STATE_POOL_MAX (a whole number, at least 1), else its declared default."""
    return int(settings.get(POOL_MAX_ENV))


class StateStoreResource(dg.ConfigurableResource):
    """PostgreSQL state store; assets call its RPCs through `get_client()`."""

    database_url: str = ""  # empty: resolve from settings (MDAME_DATABASE_URL or local cluster)
    pool_max: int | None = None  # None: this process's MDAME_STATE_POOL_MAX (default 4)

    def get_client(self) -> StateStore:
        url = self.database_url or settings.database_url("app")
        pool_max = self.pool_max if self.pool_max is not None else pool_max_setting()
        key = (os.getpid(), url, pool_max)
        with _lock:
            client = _clients.get(key)
            if client is None:
                client = _clients[key] = StateStore(url, pool_max=pool_max)
            return client


def close_clients() -> None:
    """Close every cached client of this process (tests, orderly shutdown)."""
    with _lock:
        for key in [k for k in _clients if k[0] == os.getpid()]:
            _clients.pop(key).close()
