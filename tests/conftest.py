"""Shared fixtures: the local PostgreSQL cluster, a migrated template database, fresh databases.

The template `mdame_template_<hash>` is migrated once (ENV=dev) and keyed on the migration files
and the runner, so a changed migration builds a new one. Each test that needs a database gets a
copy made with CREATE DATABASE ... TEMPLATE (fast, and fully isolated), dropped afterwards.
The helpers live in tests/scratch_db.py, which the crash harness (`make chaos`) shares.

`rendered` is one partition run for real up to its approved render, once per test run (across
xdist workers, tests/snapshots.py), shared by tests/faults and tests/checks.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from mdame_core import settings
from tests.leftovers import TAG_VAR, leftovers, stop, tag_this_process
from tests.scratch_db import (  # noqa: F401 - re-exported for tests that import them
    DbUrls,
    create_database,
    drop_database,
    ensure_template,
    server_url,
    superuser,
)
from tests.snapshots import Snapshot, drop_run_snapshots, name_run, shared_snapshot

os.environ.setdefault("ENV", "dev")
# Tests pick their media backend themselves (the S3 ones through the s3_bucket fixture).
os.environ.pop("MDAME_MEDIA_URL", None)
# Small frames through the same code: most tests are about state and recovery, not the encode.
# The tests of the product's frame set MDAME_MEDIA_PROFILE=shorts themselves.
os.environ.setdefault("MDAME_MEDIA_PROFILE", "tiny")


@pytest.fixture(scope="session")
def cluster() -> None:
    """The project-local cluster is running (db-local.sh start is idempotent)."""
    if settings.is_external():
        pytest.skip("state tests need the project-local cluster (unset MDAME_DATABASE_URL)")
    done = subprocess.run(
        [str(settings.REPO_ROOT / "scripts" / "db-local.sh"), "start"],
        capture_output=True,
        text=True,
        # The cluster outlives the suite on purpose: not one of its leftovers.
        env={k: v for k, v in os.environ.items() if k != TAG_VAR},
    )
    if done.returncode != 0:
        pytest.fail(f"scripts/db-local.sh start failed:\n{done.stdout}{done.stderr}")


@pytest.fixture(scope="session")
def template_db(cluster: None) -> str:
    """Name of the migrated template database for the current migration files."""
    return ensure_template()


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
def admin(fresh_db: DbUrls):  # noqa: ANN201 - a StateStore, imported lazily
    """The operator's client on the same database as `state` (registry, caps, grants, queue)."""
    from tests.adminkit import admin_of

    return admin_of(fresh_db.app)


@pytest.fixture
def owner(fresh_db: DbUrls) -> Iterator[psycopg.Connection]:
    """An autocommit owner connection, for inspecting (and, in TTL tests, aging) rows."""
    with psycopg.connect(fresh_db.owner, autocommit=True) as conn:
        yield conn


def _checks_leftovers(config: pytest.Config) -> bool:
    """Each process that runs tests checks what it started: an xdist worker, or a run without
    workers (an xdist controller starts only the workers, which it stops itself)."""
    return hasattr(config, "workerinput") or getattr(config.option, "dist", "no") == "no"


def pytest_configure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        name_run()
    if _checks_leftovers(config):
        config.stash[_TAG] = tag_this_process()


_TAG = pytest.StashKey[str]()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """No process the tests started outlives them: those still alive once every fixture is torn
    down are stopped (SIGKILL where SIGTERM is ignored) and fail the run, named. A worker hands
    its list to the controller (pytest_testnodedown), which fails the run."""
    config = session.config
    tag = config.stash.get(_TAG, None)
    found = leftovers(tag) if tag is not None else set()
    if found:
        described = stop(found)
        if hasattr(config, "workerinput"):
            config.workeroutput["leftover_processes"] = described  # type: ignore[attr-defined]
        else:
            config.stash.setdefault(_LEFT, []).extend(described)
    if config.stash.get(_LEFT, None):
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:  # noqa: ANN001 - xdist's WorkerController
    described = getattr(node, "workeroutput", {}).get("leftover_processes")
    if described:
        node.config.stash.setdefault(_LEFT, []).extend(described)


_LEFT = pytest.StashKey[list[str]]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:  # noqa: ANN001
    described = config.stash.get(_LEFT, None)
    if described:
        terminalreporter.write_line(
            "processes the tests started were still alive at the end (stopped now):", red=True
        )
        for line in described:
            terminalreporter.write_line(f"  {line}", red=True)


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        drop_run_snapshots()


@pytest.fixture(scope="session")
def rendered(template_db: str) -> Snapshot:
    """science 2026-11-29 run up to its approved render: a database to copy and its home,
    built once per run (tests/snapshots.py)."""
    from mdame_cli.runs import whole_graph

    return shared_snapshot("rendered", template_db, whole_graph(without=("publications",)))


@pytest.fixture(scope="session")
def moto_s3() -> Iterator:
    """One local S3-protocol server (moto's server mode) for the session; see tests/s3kit.py."""
    from tests.s3kit import moto_server

    with moto_server() as server:
        yield server


@pytest.fixture
def s3_bucket(moto_s3):
    """A fresh bucket on the session's moto server (tests.s3kit.S3Bucket: .url, .env())."""
    return moto_s3.new_bucket()


# Stop signals ignored in a pytest worker (seen in CI: SIGINT, SIGQUIT and SIGTERM set to
# SIG_IGN at the C level by something an earlier test in the same worker ran) are inherited by
# every process a later test starts, which then cannot be stopped: the shutdown and takeover
# tests failed that way. Each test starts with the default dispositions.
_STOP_DEFAULTS = (
    (signal.SIGTERM, signal.SIG_DFL),
    (signal.SIGQUIT, signal.SIG_DFL),
    (signal.SIGINT, signal.default_int_handler),
)


def _ignored_signals() -> set[int]:
    status = Path("/proc/self/status").read_text(encoding="ascii")
    mask = int(status.split("SigIgn:")[1].split()[0], 16)
    return {n for n in range(1, 65) if mask >> (n - 1) & 1}


@pytest.fixture(autouse=True)
def default_stop_signals() -> Iterator[None]:
    ignored = _ignored_signals()
    for signum, handler in _STOP_DEFAULTS:
        if signum in ignored:
            signal.signal(signum, handler)
    yield
