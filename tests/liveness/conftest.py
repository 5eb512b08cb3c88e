"""A World: a fresh MD-AME database, a fresh Dagster storage database and a home on disk."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from liveness_kit import World

from tests.scratch_db import create_database, drop_database


@pytest.fixture
def world(fresh_db, tmp_path: Path) -> Iterator[World]:
    dagster_db = create_database(None, "_dagster")
    home = tmp_path / "home"
    home.mkdir()
    try:
        yield World(fresh_db.owner, fresh_db.app, dagster_db.owner, home)
    finally:
        drop_database(dagster_db.name)
