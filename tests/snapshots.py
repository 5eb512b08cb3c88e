"""Partition snapshots built once per test run, whichever xdist worker asks first.

A snapshot is one partition run for real up to some asset (a database nobody stays connected
to, so that tests copy it with CREATE DATABASE ... TEMPLATE, and a home holding its media).
The first worker to ask builds it under a file lock; the others wait on the lock and reuse it,
so the run pays for each snapshot once rather than once per worker. The controller process
names the run (RUN_ENV, inherited by its workers) and drops the run's snapshots at its end
(`drop_run_snapshots`, called from tests/conftest.py).
"""

from __future__ import annotations

import fcntl
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import pytest

from tests import scratch_db

RUN_ENV = "MDAME_TEST_RUN"
# The partition every snapshot runs; tests/faults/faultkit.py and tests/checks/checkkit.py name
# the same one.
SNAPSHOT_DAY, SNAPSHOT_DIMENSION = date(2026, 11, 29), "science"


@dataclass(frozen=True)
class Snapshot:
    db_name: str  # nobody connected: a template for CREATE DATABASE
    home: Path


def _run_dir() -> Path:
    return Path(tempfile.gettempdir()) / f"mdame-test-run-{os.environ[RUN_ENV]}"


def _db_name(name: str) -> str:
    # The controller's pid in the scratch prefix: scratch_db.drop_leftovers drops it once that
    # process is gone, should the run die before dropping it itself.
    return f"{scratch_db.SCRATCH_PREFIX}{os.environ[RUN_ENV]}_{name}"


def offline_resources(app_url: str, **overrides: Any) -> dict[str, Any]:
    """The resources of a run on the offline providers against the database at `app_url`."""
    from mdame_resources.media import MediaStoreResource
    from mdame_resources.providers.selection import offline_providers
    from mdame_resources.state import StateStoreResource

    return {
        "state": StateStoreResource(database_url=app_url),
        "media": MediaStoreResource(),
        **offline_providers(),
        **overrides,
    }


def materialize_partition(db: scratch_db.DbUrls, home: Path, selection: Sequence[Any]) -> None:
    """The snapshot's partition, on the offline providers, from an empty registry."""
    import dagster as dg

    from mdame_core.state import StateStore
    from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
    from mdame_resources.state import close_clients
    from mdame_runtime.partition_keys import DIMENSION_PARTITION, partition_key

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDAME_HOME", str(home))
        mp.delenv("MDAME_MEDIA_ROOT", raising=False)
        # Closed at once: the snapshot is a template, which no session may hold open.
        with StateStore(db.owner, role="admin", env="dev") as admin:
            sync_registry(admin, DIMENSIONS_DIR)
        try:
            with dg.instance_for_test() as instance:
                instance.add_dynamic_partitions(DIMENSION_PARTITION, [SNAPSHOT_DIMENSION])
                result = dg.materialize(
                    selection,
                    partition_key=str(partition_key(SNAPSHOT_DAY, SNAPSHOT_DIMENSION)),
                    instance=instance,
                    resources=offline_resources(db.app),
                    raise_on_error=False,
                )
        finally:
            close_clients()  # no connection may stay: the database is copied from
    assert result.success, [e.message for e in result.all_events if e.is_failure]


def shared_snapshot(name: str, template: str, selection: Sequence[Any]) -> Snapshot:
    """The run's snapshot `name`: the partition materialized up to `selection`, built here
    unless another worker of this run built it already."""
    folder = _run_dir()
    folder.mkdir(exist_ok=True)
    snapshot = Snapshot(_db_name(name), folder / name)
    with open(folder / f"{name}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or its process dies
        outcome = folder / f"{name}.outcome"
        if outcome.exists():
            if (said := outcome.read_text()) != "ok":
                pytest.fail(f"the {name} snapshot failed in another worker: {said}")
            return snapshot
        try:
            with scratch_db.superuser() as su:
                su.execute(f'DROP DATABASE IF EXISTS "{snapshot.db_name}" WITH (FORCE)')
                su.execute(
                    f'CREATE DATABASE "{snapshot.db_name}" TEMPLATE "{template}" OWNER mdame_owner'
                )
            shutil.rmtree(snapshot.home, ignore_errors=True)
            snapshot.home.mkdir()
            materialize_partition(scratch_db.db_urls(snapshot.db_name), snapshot.home, selection)
        except BaseException as exc:
            outcome.write_text(f"{type(exc).__name__}: {exc}"[:2000])
            raise
        outcome.write_text("ok")
    return snapshot


def name_run() -> None:
    """In the controller: a name for this run, which its xdist workers inherit."""
    os.environ[RUN_ENV] = str(os.getpid())


def drop_run_snapshots() -> None:
    """In the controller, at its end: the run's snapshot databases and homes."""
    if RUN_ENV not in os.environ or not _run_dir().exists():
        return  # no snapshot was made (nor, perhaps, the cluster started)
    prefix = _db_name("")
    with scratch_db.superuser() as su:
        names = [
            r[0]
            for r in su.execute(
                "SELECT datname FROM pg_database WHERE starts_with(datname, %s)", (prefix,)
            ).fetchall()
        ]
        for db in names:
            su.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    shutil.rmtree(_run_dir(), ignore_errors=True)
