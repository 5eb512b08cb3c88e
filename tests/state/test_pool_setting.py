"""The state client's pool size per process: MDAME_STATE_POOL_MAX, read where the resource
builds its client, on a real PostgreSQL. docs/deployment.md sizes max_connections with it."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg_pool import PoolTimeout

from mdame_core.settings import SettingsError
from mdame_resources.state import POOL_MAX_ENV, StateStoreResource, close_clients


@pytest.fixture
def pool_env(monkeypatch: pytest.MonkeyPatch) -> Iterator[pytest.MonkeyPatch]:
    monkeypatch.delenv(POOL_MAX_ENV, raising=False)
    yield monkeypatch
    close_clients()


def _backends(owner_url: str, dbname: str) -> int:
    with psycopg.connect(owner_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = %s AND usename = 'mdame_app'",
            [dbname],
        ).fetchone()
    return int(row[0]) if row else 0


def test_the_pool_opens_as_many_connections_as_the_setting_allows(pool_env, fresh_db) -> None:
    pool_env.setenv(POOL_MAX_ENV, "6")
    pool = StateStoreResource(database_url=fresh_db.app).get_client()._pool
    assert pool.get_stats()["pool_max"] == 6
    held = [pool.getconn(timeout=10) for _ in range(6)]
    try:
        assert _backends(fresh_db.owner, fresh_db.name) == 6
        with pytest.raises(PoolTimeout):  # a seventh waits: the pool is at its maximum
            pool.getconn(timeout=0.5)
    finally:
        for conn in held:
            pool.putconn(conn)


def test_default_and_explicit_config(pool_env, fresh_db) -> None:
    assert StateStoreResource(database_url=fresh_db.app).get_client()._pool.max_size == 4
    pool_env.setenv(POOL_MAX_ENV, "9")
    # Config set on the resource (a test's, a bench's) wins over the process's setting.
    explicit = StateStoreResource(database_url=fresh_db.app, pool_max=2).get_client()
    assert explicit._pool.max_size == 2
    assert StateStoreResource(database_url=fresh_db.app).get_client()._pool.max_size == 9


@pytest.mark.parametrize("raw", ["0", "-2", "four", "2.5"])
def test_a_bad_value_is_refused_naming_the_variable(pool_env, fresh_db, raw: str) -> None:
    pool_env.setenv(POOL_MAX_ENV, raw)
    with pytest.raises(SettingsError, match=f"{POOL_MAX_ENV}={raw!r} is not allowed"):
        StateStoreResource(database_url=fresh_db.app).get_client()
