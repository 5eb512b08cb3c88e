"""The Dagster UI as an operator meets it: `mdame ui` (`dagster dev`: webserver, daemon, one code
server per location of workspace.yaml; and a run server per location) on a free port, against a
scratch MD-AME database, a scratch Dagster storage database and a scratch home, on the offline
providers; and Debian's chromium, driven by Playwright (`playwright install` cannot download a
browser here, so it is launched by path).

`mdame ui` is stopped at the end with SIGTERM, which it passes to its whole group.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import httpx
import psycopg

from mdame_cli.ui import GRACE_S, free_port, stop_group
from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from mdame_runtime.partition_keys import DIMENSION_PARTITION
from tests.adminkit import as_admin
from tests.childenv import child_environ

REPO = Path(__file__).resolve().parents[2]
# Screenshots and the `dagster dev` log land here (gitignored); CI may keep the folder.
ARTIFACTS = Path(os.environ.get("MDAME_TEST_ARTIFACTS") or REPO / "test-artifacts") / "ui"
# The hop sensors look for work this often in the test (30 s in a deployment).
HOP_INTERVAL_S = "2"


@dataclass
class DagsterUI:
    url: str
    app_url: str
    dagster_url: str
    home: Path
    log: Path
    proc: subprocess.Popen

    def tail(self, lines: int = 60) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])

    def rows(self, query: str, args: tuple = ()) -> list[tuple]:
        with psycopg.connect(self.app_url, autocommit=True) as conn:
            return conn.execute(query, args).fetchall()


def _env(owner_url: str, app_url: str, dagster_url: str, home: Path) -> dict[str, str]:
    env = child_environ("DAGSTER_")
    env.update(
        ENV="dev",
        MDAME_PROVIDERS="offline",
        MDAME_DATABASE_URL=owner_url,
        MDAME_APP_DATABASE_URL=app_url,
        MDAME_DAGSTER_DATABASE_URL=dagster_url,
        MDAME_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        MDAME_LOG_FILE=str(home / "logs" / "pipeline.jsonl"),
        MDAME_HOP_SENSOR_INTERVAL_S=HOP_INTERVAL_S,
        PYTHONUNBUFFERED="1",
    )
    return env


def _prepare(app_url: str, dagster_url: str, home: Path) -> None:
    """The dimensions in the database and as partitions, as the registry sensor would leave them
    after its first tick (so the UI shows them without waiting a minute for it)."""
    (home / "dagster").mkdir(parents=True)
    (home / "logs").mkdir()
    (home / "dagster" / "dagster.yaml").symlink_to(REPO / "dagster.yaml")
    with StateStore(app_url, env="dev") as state:
        report = sync_registry(as_admin(state), DIMENSIONS_DIR)
    saved = os.environ.get("MDAME_DAGSTER_DATABASE_URL")
    os.environ["MDAME_DAGSTER_DATABASE_URL"] = dagster_url
    try:
        with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
            instance.add_dynamic_partitions(DIMENSION_PARTITION, list(report.active))
    finally:
        if saved is None:
            os.environ.pop("MDAME_DAGSTER_DATABASE_URL", None)
        else:
            os.environ["MDAME_DAGSTER_DATABASE_URL"] = saved


@contextmanager
def dagster_dev(
    owner_url: str, app_url: str, dagster_url: str, home: Path, log: Path, timeout: float = 300
) -> Iterator[DagsterUI]:
    """`dagster dev` on a free port, ready to serve (both code locations may still be loading:
    the browser waits for what it needs on the page)."""
    _prepare(app_url, dagster_url, home)
    port = free_port()
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "mdame"), "ui", "--port", str(port)],
        cwd=REPO,
        env=_env(owner_url, app_url, dagster_url, home),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, stopped as a whole below
    )
    out.close()
    ui = DagsterUI(f"http://127.0.0.1:{port}", app_url, dagster_url, home, log, proc)
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise AssertionError(f"dagster dev exited ({proc.returncode}):\n{ui.tail()}")
            try:
                if httpx.get(f"{ui.url}/server_info", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline:
                raise AssertionError(f"dagster dev not serving after {timeout}s:\n{ui.tail()}")
            time.sleep(0.5)
        yield ui
    finally:
        # `mdame ui` stops its own group (dagster dev and the run servers) within GRACE_S.
        stop_group(proc.pid, grace_s=GRACE_S + 10)
        proc.wait()
