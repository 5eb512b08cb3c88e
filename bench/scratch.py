"""Scratch databases on the local cluster for the benches: a migrated state database and a
Dagster database, dropped at the end."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from urllib.parse import urlsplit

import psycopg

from mdame_core import settings
from mdame_core.migrate import migrate


def _url(superuser: str, user: str, dbname: str) -> str:
    parts = urlsplit(superuser)
    return f"postgresql://{user}@{parts.hostname}:{parts.port}/{dbname}"


@contextmanager
def scratch_databases(bench: str = "scale") -> Iterator[tuple[str, str, str]]:
    """(owner URL, app URL) of a migrated state database, and a Dagster database's URL.
    `bench` names the databases (mdame_bench_<bench>_...), so a leftover says whose it is."""
    superuser = settings.superuser_url()  # before the bench points MDAME_HOME elsewhere
    tag = f"{os.getpid()}_{int(time.time())}"
    state_db, dagster_db = f"mdame_bench_{bench}_{tag}", f"mdame_bench_{bench}_dagster_{tag}"
    with psycopg.connect(superuser, autocommit=True) as su:
        su.execute(f'CREATE DATABASE "{state_db}" OWNER {settings.OWNER_ROLE}')
        su.execute(f'CREATE DATABASE "{dagster_db}" OWNER {settings.OWNER_ROLE}')
    try:
        owner = _url(superuser, settings.OWNER_ROLE, state_db)
        migrate(owner, "dev")
        yield (
            owner,
            _url(superuser, settings.APP_ROLE, state_db),
            _url(superuser, settings.OWNER_ROLE, dagster_db),
        )
    finally:
        with psycopg.connect(superuser, autocommit=True) as su:
            for name in (state_db, dagster_db):
                su.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
