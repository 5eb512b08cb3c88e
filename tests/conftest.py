"""Shared fixtures: the local PostgreSQL cluster, a migrated template database, fresh databases.

The template `mdame_template_<hash>` is migrated once (ENV=dev) and keyed on the migration files
and the runner, so a changed migration builds a new one. Each test that needs a database gets a
copy made with CREATE DATABASE ... TEMPLATE (fast, and fully isolated), dropped afterwards.
The helpers live in tests/scratch_db.py, which the crash harness (`make chaos`) shares.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator

import psycopg
import pytest

from mdame_core import settings
from tests.scratch_db import (  # noqa: F401 - re-exported for tests that import them
    DbUrls,
    create_database,
    drop_database,
    ensure_template,
    server_url,
    superuser,
)

os.environ.setdefault("ENV", "dev")


@pytest.fixture(scope="session")
def cluster() -> None:
    """The project-local cluster is running (db-local.sh start is idempotent)."""
    if settings.is_external():
        pytest.skip("state tests need the project-local cluster (unset MDAME_DATABASE_URL)")
    done = subprocess.run(
        [str(settings.REPO_ROOT / "scripts" / "db-local.sh"), "start"],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/db-local.sh start failed:\n{done.stdout}{done.stderr}")


@pytest.fixture(scope="session")
def template_db(cluster: None) -> str:
    """Name of the migrated template database for the current migration files."""
    return ensure_template()


@pytest.fixture
def fresh_db(template_db: str) -> Iterator[DbUrls]:
    """A migrated (ENV=dev) database of its own, dropped after the test."""
    db = create_database(template_db)
    try:
        yield db
    finally:
        drop_database(db.name)


@pytest.fixture
def empty_db(cluster: None) -> Iterator[DbUrls]:
    """An empty database owned by mdame_owner, for migration tests."""
    db = create_database(None)
    try:
        yield db
    finally:
        drop_database(db.name)


@pytest.fixture
def state(fresh_db: DbUrls) -> Iterator:
    from mdame_core.state import StateStore

    store = StateStore(fresh_db.app, env="dev", pool_max=4)
    try:
        yield store
    finally:
        store.close()


@pytest.fixture
def owner(fresh_db: DbUrls) -> Iterator[psycopg.Connection]:
    """An autocommit owner connection, for inspecting (and, in TTL tests, aging) rows."""
    with psycopg.connect(fresh_db.owner, autocommit=True) as conn:
        yield conn
