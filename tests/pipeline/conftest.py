"""Fixtures for running the real asset graph: a fresh database, a temp MDAME_HOME, an
ephemeral Dagster instance, and the offline providers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from mdame_resources.media import MediaStoreResource
from mdame_resources.providers.selection import offline_providers
from mdame_resources.state import StateStoreResource, close_clients
from mdame_runtime.partition_keys import DIMENSION_PARTITION
from tests.adminkit import as_admin


@dataclass
class Pipeline:
    state: StateStore
    instance: dg.DagsterInstance
    resources: dict[str, Any]
    home: Path

    def sync(self, folder: Path = DIMENSIONS_DIR) -> list[str]:
        report = sync_registry(as_admin(self.state), folder)
        self.instance.add_dynamic_partitions(DIMENSION_PARTITION, list(report.active))
        return list(report.active)


@pytest.fixture
def pipeline(fresh_db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Pipeline]:
    monkeypatch.setenv("MDAME_HOME", str(tmp_path))
    state = StateStore(fresh_db.app, env="dev")
    resources = {
        "state": StateStoreResource(database_url=fresh_db.app),
        "media": MediaStoreResource(),
        **offline_providers(),
    }
    with dg.instance_for_test() as instance:
        yield Pipeline(state, instance, resources, tmp_path)
    close_clients()  # before the database is dropped under the cached pools
    state.close()
