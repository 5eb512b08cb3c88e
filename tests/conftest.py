"""Shared fixtures: the local PostgreSQL cluster, a migrated template database, fresh databases.

The template `mdame_template_<hash>` is migrated once (ENV=dev) and keyed on the migration files
and the runner, so a changed migration builds a new one. Each test that needs a database gets a
copy made with CREATE DATABASE ... TEMPLATE (fast, and fully isolated), dropped afterwards.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit

import psycopg
import pytest

from mdame_core import settings
from mdame_core.migrate import migrate, migrations_digest

os.environ.setdefault("ENV", "dev")

# pg_advisory_lock key serialising template builds across concurrent pytest sessions.
_TEMPLATE_LOCK = 0x6D64616D6574  # "mdamet"
_counter = itertools.count()


@dataclass(frozen=True)
class DbUrls:
    name: str
    owner: str
    app: str


def server_url(user: str, dbname: str) -> str:
    parts = urlsplit(settings.superuser_url())
    return f"postgresql://{user}@{parts.hostname}:{parts.port}/{dbname}"


def superuser() -> psycopg.Connection:
    return psycopg.connect(settings.superuser_url(), autocommit=True)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _drop(su: psycopg.Connection, name: str) -> None:
    su.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


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
    name = f"mdame_template_{migrations_digest()[:16]}"
    with superuser() as su:
        su.execute("SELECT pg_advisory_lock(%s)", (_TEMPLATE_LOCK,))
        _drop_leftovers(su, keep=name)
        if not su.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
            building = f"{name}_build"
            _drop(su, building)
            su.execute(f'CREATE DATABASE "{building}" OWNER mdame_owner')
            migrate(server_url(settings.OWNER_ROLE, building), "dev")
            # Renamed only once fully migrated: a crash mid-build never leaves a bad template.
            su.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
            su.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false')
        su.execute("SELECT pg_advisory_unlock(%s)", (_TEMPLATE_LOCK,))
    return name


def _drop_leftovers(su: psycopg.Connection, keep: str) -> None:
    """Old templates and databases of test sessions that died without cleaning up."""
    names = [
        r[0]
        for r in su.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE 'mdame\\_t%'"
        ).fetchall()
    ]
    for name in names:
        if name == keep:
            continue
        if name.startswith("mdame_template_"):
            su.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE false')
        elif name.startswith("mdame_t_"):
            pid = name.split("_")[2]
            if not pid.isdigit() or _pid_alive(int(pid)):
                continue
        else:
            continue
        # In use by a concurrent session: it is cleaned up next time.
        with contextlib.suppress(psycopg.Error):
            _drop(su, name)


def create_database(template: str | None) -> DbUrls:
    name = f"mdame_t_{os.getpid()}_{next(_counter)}"
    source = f' TEMPLATE "{template}"' if template else ""
    with superuser() as su:
        su.execute(f'CREATE DATABASE "{name}"{source} OWNER mdame_owner')
    return DbUrls(
        name=name,
        owner=server_url(settings.OWNER_ROLE, name),
        app=server_url(settings.APP_ROLE, name),
    )


def drop_database(name: str) -> None:
    with superuser() as su:
        _drop(su, name)


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
