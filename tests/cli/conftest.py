"""A fresh shell's world: scratch databases (MD-AME state and Dagster storage), a temp home,
and the dimensions registered as `make demo` leaves them."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from mdame_core.settings import REPO_ROOT
from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import sync_registry
from mdame_runtime.partition_keys import DIMENSION_PARTITION
from tests.adminkit import as_admin
from tests.scratch_db import create_database, drop_database


@pytest.fixture
def shell_env(fresh_db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict]:
    dagster_db = create_database(None, "_dagster")
    home = tmp_path / "home"
    (home / "dagster").mkdir(parents=True)
    (home / "dagster" / "dagster.yaml").symlink_to(REPO_ROOT / "dagster.yaml")
    (tmp_path / "tmp").mkdir()
    env = {
        "PATH": os.environ["PATH"],
        "HOME": str(tmp_path),
        "MDAME_HOME": str(home),
        "MDAME_DATABASE_URL": fresh_db.owner,
        "MDAME_DAGSTER_DATABASE_URL": dagster_db.owner,
        "TMPDIR": str(tmp_path / "tmp"),
    }
    try:
        # What `make demo` leaves behind: the niches in PostgreSQL and as Dagster partitions.
        with StateStore(fresh_db.app, env="dev") as state:
            active = sync_registry(as_admin(state)).active
        monkeypatch.setenv("MDAME_DAGSTER_DATABASE_URL", dagster_db.owner)
        with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
            instance.add_dynamic_partitions(DIMENSION_PARTITION, list(active))
        yield env
    finally:
        drop_database(dagster_db.name)
