"""Fixtures for the asset-check tests: one partition at three points of its life.

- `content_rig`: a fresh database with the registry synced and an empty home (the content
  stages cost seconds, so those tests run them for real each time).
- `clipped_rig`: a private copy of a partition whose scene clips are all made (scripts at
  visuals_ready), so voice and clip faults start right before voice_tracks.
- `rendered_rig`: a private copy of a partition with its render approved, right before
  publishing.

Both snapshots are made once per session and copied per test with CREATE DATABASE ...
TEMPLATE and a copied home, as tests/faults does: `clipped` here (clips only), `rendered` in
tests/conftest.py (clips, espeak and one ffmpeg render), shared with tests/faults.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg
import pytest
from checkkit import DIMENSION, KEY, graph

from mdame_core.state import StateStore
from mdame_domain.media_store import LocalMediaStore
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from mdame_resources.state import close_clients
from mdame_runtime.partition_keys import DIMENSION_PARTITION
from tests import scratch_db
from tests.adminkit import as_admin
from tests.snapshots import Snapshot, offline_resources, shared_snapshot


@dataclass
class Rig:
    """One partition of its own: database (app client and owner URL), home, Dagster instance."""

    db: scratch_db.DbUrls
    home: Path
    state: StateStore
    instance: dg.DagsterInstance

    def materialize(self, selection: list[Any], **provider_overrides: Any):
        return dg.materialize(
            selection,
            partition_key=KEY,
            instance=self.instance,
            resources=offline_resources(self.db.app, **provider_overrides),
            raise_on_error=False,
        )

    def script(self):
        [script] = self.state.list_work_units("script")
        return script

    def store(self) -> LocalMediaStore:
        return LocalMediaStore(self.home / "media")

    def media_files(self) -> set[str]:
        """Every stored media object (derived-output memos and temp files aside)."""
        root = self.home / "media"
        return {
            str(p.relative_to(root))
            for p in root.rglob("*")
            if p.is_file() and "derived" not in p.parts and not p.name.startswith(".")
        }

    def owner_execute(self, sql: str, args: Any = ()) -> None:
        """Writes as the schema owner: only for simulating a bug in code other than the check."""
        with psycopg.connect(self.db.owner, autocommit=True) as conn:
            conn.execute(sql, args)


@pytest.fixture(scope="session")
def clipped(template_db: str) -> Snapshot:
    """The checks' partition run up to its scene clips, once per run (tests/snapshots.py)."""
    return shared_snapshot("clipped", template_db, graph(upto="scene_clips"))


@contextmanager
def _rig(snapshot: Snapshot | None, template_db: str, tmp_path: Path) -> Iterator[Rig]:
    db = scratch_db.create_database(snapshot.db_name if snapshot else template_db, "_check")
    home = tmp_path / "home"
    if snapshot is not None:
        shutil.copytree(snapshot.home, home, symlinks=True)
    home.mkdir(exist_ok=True)
    try:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("MDAME_HOME", str(home))
            mp.delenv("MDAME_MEDIA_ROOT", raising=False)
            state = StateStore(db.app, env="dev")
            try:
                if snapshot is None:
                    sync_registry(as_admin(state), DIMENSIONS_DIR)
                with dg.instance_for_test() as instance:
                    instance.add_dynamic_partitions(DIMENSION_PARTITION, [DIMENSION])
                    yield Rig(db, home, state, instance)
            finally:
                close_clients()  # before the database is dropped under the cached pools
                state.close()
    finally:
        scratch_db.drop_database(db.name)


@pytest.fixture
def content_rig(template_db: str, tmp_path: Path) -> Iterator[Rig]:
    with _rig(None, template_db, tmp_path) as rig:
        yield rig


@pytest.fixture
def clipped_rig(clipped: Snapshot, template_db: str, tmp_path: Path) -> Iterator[Rig]:
    with _rig(clipped, template_db, tmp_path) as rig:
        yield rig


@pytest.fixture
def rendered_rig(rendered: Snapshot, template_db: str, tmp_path: Path) -> Iterator[Rig]:
    with _rig(rendered, template_db, tmp_path) as rig:
        yield rig
