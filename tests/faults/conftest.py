"""Fixtures for the fault tests.

`rendered` (tests/conftest.py, shared with tests/checks) runs one partition for real, once per
session, up to its approved render (the expensive part: clips, voice, ffmpeg render and probes)
and keeps that database and home. Each `rig` is a private copy of it (CREATE DATABASE ...
TEMPLATE, and a copied home), so a test starts right before publishing in well under a second.
`warm_home` is a fresh home whose media store already holds those renders, so a full run from
scratch reuses the render (the store's own derived-output memo) instead of paying ffmpeg again.
`throwaway_cluster` is a PostgreSQL cluster of the test's own, for stopping the server.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from faultkit import DAY, DIMENSION, close_short_clients

from mdame_cli.ui import free_port
from mdame_core import settings
from mdame_core.migrate import migrate
from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from mdame_resources.state import close_clients
from mdame_runtime.partition_keys import DIMENSION_PARTITION, partition_key
from tests import scratch_db
from tests.adminkit import as_admin
from tests.childenv import child_environ
from tests.snapshots import offline_resources

DB_LOCAL = settings.REPO_ROOT / "scripts" / "db-local.sh"


@dataclass
class Rig:
    """A partition right before publishing, all of its own: database, home, Dagster instance."""

    db: scratch_db.DbUrls
    su_url: str
    home: Path
    state: StateStore
    instance: dg.DagsterInstance

    def materialize(self, selection: list[Any], **resource_overrides: Any):
        return dg.materialize(
            selection,
            partition_key=str(partition_key(DAY, DIMENSION)),
            instance=self.instance,
            resources=offline_resources(self.db.app, **resource_overrides),
            raise_on_error=False,
        )

    def script(self):
        [script] = self.state.list_work_units("script")
        return script


@pytest.fixture
def rig(rendered, tmp_path: Path) -> Iterator[Rig]:
    su_url = settings.superuser_url()  # before MDAME_HOME points elsewhere
    db = scratch_db.create_database(rendered.db_name, "_rig")
    home = tmp_path / "home"
    shutil.copytree(rendered.home, home, symlinks=True)
    try:
        with pytest.MonkeyPatch.context() as mp:
            # In-process runs (run_partition) resolve everything from the environment.
            mp.setenv("MDAME_HOME", str(home))
            mp.setenv("MDAME_DATABASE_URL", db.owner)
            mp.setenv("MDAME_APP_DATABASE_URL", db.app)
            mp.delenv("MDAME_MEDIA_ROOT", raising=False)
            state = StateStore(db.app, env="dev")
            try:
                with dg.instance_for_test() as instance:
                    instance.add_dynamic_partitions(DIMENSION_PARTITION, [DIMENSION])
                    yield Rig(db, su_url, home, state, instance)
            finally:
                close_clients()
                close_short_clients()
                state.close()
    finally:
        scratch_db.drop_database(db.name)


@pytest.fixture
def warm_home(rendered, tmp_path: Path) -> Path:
    """An empty home whose media store holds what a run of this partition stores."""
    home = tmp_path / "home"
    shutil.copytree(rendered.home / "media", home / "media", symlinks=True)
    return home


@pytest.fixture
def fresh_synced(fresh_db: scratch_db.DbUrls) -> scratch_db.DbUrls:
    """A fresh database with the dimension registry synced (what the registry sensor does)."""
    with StateStore(fresh_db.app, env="dev") as state:
        sync_registry(as_admin(state), DIMENSIONS_DIR)
    return fresh_db


# ------------------------------------------------------------------------------------------
# A PostgreSQL cluster of the test's own
# ------------------------------------------------------------------------------------------
@dataclass
class Cluster:
    home: Path
    env: dict[str, str]
    owner: str
    app: str
    superuser: str

    def ctl(self, command: str) -> None:
        """scripts/db-local.sh start|stop|kill against this cluster only."""
        done = subprocess.run(
            [str(DB_LOCAL), command], env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, f"db-local.sh {command}: {done.stdout}{done.stderr}"


@pytest.fixture
def throwaway_cluster() -> Iterator[Cluster]:
    if settings.is_external():
        pytest.skip("needs local PostgreSQL binaries (unset MDAME_DATABASE_URL)")
    home = Path(tempfile.mkdtemp(prefix="mdame-faults-pg-"))
    os.chmod(home, 0o755)  # as root, the server runs as 'postgres' and must reach its data
    port = free_port()
    data = home / "pg" / "data"
    # Written first, so db-local.sh can only ever touch this data directory and port.
    (home / "pg.env").write_text(f"MDAME_PG_PORT={port}\nMDAME_PG_DATA={data}\n")
    env = child_environ()
    env.update(MDAME_HOME=str(home), MDAME_PG_PORT=str(port))
    base = f"127.0.0.1:{port}"
    cluster = Cluster(
        home,
        env,
        owner=f"postgresql://{settings.OWNER_ROLE}@{base}/mdame",
        app=f"postgresql://{settings.APP_ROLE}@{base}/mdame",
        superuser=f"postgresql://postgres@{base}/postgres",
    )
    try:
        cluster.ctl("start")
        migrate(cluster.owner, "dev")
        yield cluster
    finally:
        subprocess.run([str(DB_LOCAL), "kill"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(home, ignore_errors=True)
