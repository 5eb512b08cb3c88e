"""Scratch databases on the local cluster: a migrated template, and fresh copies of it.

The template `mdame_template_<hash>` is migrated once (ENV=dev) and keyed on the migration files
and the runner, so a changed migration builds a new one. A fresh database is a copy made with
CREATE DATABASE ... TEMPLATE (fast, and fully isolated). The tests (tests/conftest.py) and the
crash harness (`make chaos`) both use these; they need the local cluster's superuser.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

import psycopg

from mdame_core import settings
from mdame_core.migrate import migrate, migrations_digest

# pg_advisory_lock key serialising template builds across concurrent sessions.
_TEMPLATE_LOCK = 0x6D64616D6574  # "mdamet"
# Scratch databases are named mdame_t_<pid>_<n>: leftovers of a dead process are recognisable.
SCRATCH_PREFIX = "mdame_t_"
_counter = itertools.count()


@dataclass(frozen=True)
class DbUrls:
    name: str
    owner: str
    app: str


def server_url(user: str, dbname: str) -> str:
    parts = urlsplit(settings.superuser_url())
    return f"postgresql://{user}@{parts.hostname}:{parts.port}/{dbname}"


def db_urls(name: str) -> DbUrls:
    return DbUrls(
        name=name,
        owner=server_url(settings.OWNER_ROLE, name),
        app=server_url(settings.APP_ROLE, name),
    )


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


def ensure_template() -> str:
    """Name of the migrated template database for the current migration files (built once)."""
    name = f"mdame_template_{migrations_digest()[:16]}"
    with superuser() as su:
        su.execute("SELECT pg_advisory_lock(%s)", (_TEMPLATE_LOCK,))
        try:
            drop_leftovers(su, keep=name)
            if not su.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone():
                building = f"{name}_build"
                _drop(su, building)
                su.execute(f'CREATE DATABASE "{building}" OWNER mdame_owner')
                migrate(server_url(settings.OWNER_ROLE, building), "dev")
                # Renamed only once fully migrated: a crash mid-build never leaves a bad template.
                su.execute(f'ALTER DATABASE "{building}" RENAME TO "{name}"')
                su.execute(f'ALTER DATABASE "{name}" WITH IS_TEMPLATE true ALLOW_CONNECTIONS false')
        finally:
            su.execute("SELECT pg_advisory_unlock(%s)", (_TEMPLATE_LOCK,))
    return name


def drop_leftovers(su: psycopg.Connection, keep: str) -> None:
    """Old templates, and scratch databases of processes that died without cleaning up."""
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
        elif name.startswith(SCRATCH_PREFIX):
            pid = name.split("_")[2]
            if not pid.isdigit() or _pid_alive(int(pid)):
                continue
        else:
            continue
        # In use by a concurrent session: it is cleaned up next time.
        with contextlib.suppress(psycopg.Error):
            _drop(su, name)


def create_database(template: str | None, tag: str = "") -> DbUrls:
    """A new database owned by mdame_owner, copied from `template` (None: empty)."""
    name = f"{SCRATCH_PREFIX}{os.getpid()}_{next(_counter)}{tag}"
    source = f' TEMPLATE "{template}"' if template else ""
    with superuser() as su:
        su.execute(f'CREATE DATABASE "{name}"{source} OWNER mdame_owner')
    return db_urls(name)


def drop_database(name: str) -> None:
    from tests.adminkit import close_admins  # imports the product client: only when dropping

    close_admins(name)
    with superuser() as su:
        _drop(su, name)
