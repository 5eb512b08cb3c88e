"""The crash hook (tests/chaos/crashpoint.py, a commit observer the harness's child installs):
MDAME_CRASH_AT kills the process with SIGKILL right before or right after the n-th commit of an
RPC; MDAME_RPC_TRACE records every committed RPC. A real subprocess is killed and the database is
read afterwards to see which commits landed."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from mdame_core import state as state_module
from mdame_core.settings import REPO_ROOT, SettingsError
from tests.chaos.crashpoint import CRASH_ENV, TRACE_ENV, CrashPoint, install_from_env

# Four dimensions created one call at a time, with other RPCs and a refused call in between:
# only committed calls of the named RPC count towards n.
CALLS = """
import os
from mdame_core.state import InvalidInput, StateStore
from tests.chaos.crashpoint import install_from_env
from tests.adminkit import as_admin

install_from_env()
store = StateStore(os.environ["URL"], env="dev")
as_admin(store).upsert_dimension("d1", "One")
as_admin(store).set_dimensions_active(["d1"])
try:
    as_admin(store).upsert_dimension("NOT A SLUG", "refused, rolled back: not a commit")
except InvalidInput:
    pass
as_admin(store).upsert_dimension("d2", "Two")
as_admin(store).upsert_dimension("d3", "Three")
as_admin(store).set_dimensions_active(["d1", "d2", "d3"])
store.close()
print("finished")
"""
ALL_COMMITS = [
    "upsert_dimension",
    "set_dimensions_active",
    "upsert_dimension",
    "upsert_dimension",
    "set_dimensions_active",
]


def _run(url: str, tmp_path: Path, **env: str) -> tuple[subprocess.CompletedProcess, list[str]]:
    trace = tmp_path / "trace.txt"
    clean_env = {k: v for k, v in os.environ.items() if k not in (CRASH_ENV, TRACE_ENV)}
    done = subprocess.run(
        [sys.executable, "-c", CALLS],
        cwd=REPO_ROOT,  # `tests.chaos` imports from the repository root
        env={**clean_env, "ENV": "dev", "URL": url, TRACE_ENV: str(trace), **env},
        capture_output=True,
        text=True,
        timeout=60,
    )
    return done, trace.read_text().splitlines() if trace.exists() else []


def _slugs(owner: psycopg.Connection) -> list[str]:
    return [r[0] for r in owner.execute("SELECT slug FROM mdame.dimensions ORDER BY slug")]


def test_a_clean_run_traces_every_commit_in_order(fresh_db, owner, tmp_path) -> None:
    done, trace = _run(fresh_db.app, tmp_path)

    assert done.returncode == 0, done.stderr
    assert "finished" in done.stdout
    assert trace == ALL_COMMITS  # the refused call is not a commit
    assert _slugs(owner) == ["d1", "d2", "d3"]


def test_crash_after_the_nth_commit_keeps_that_commit(fresh_db, owner, tmp_path) -> None:
    done, trace = _run(fresh_db.app, tmp_path, **{CRASH_ENV: "upsert_dimension:2:after"})

    assert done.returncode == -signal.SIGKILL, done.stderr
    assert "finished" not in done.stdout
    assert trace == ALL_COMMITS[:3]
    assert _slugs(owner) == ["d1", "d2"]  # d2's commit landed, d3 never ran


def test_crash_before_the_nth_commit_loses_that_commit(fresh_db, owner, tmp_path) -> None:
    done, trace = _run(fresh_db.app, tmp_path, **{CRASH_ENV: "upsert_dimension:2:before"})

    assert done.returncode == -signal.SIGKILL, done.stderr
    assert trace == ALL_COMMITS[:2]
    # d2's call ran but its transaction never committed: the server rolled it back.
    assert _slugs(owner) == ["d1"]
    active = owner.execute("SELECT count(*) FROM mdame.dimensions WHERE active").fetchone()
    assert active == (1,)


def test_a_point_the_process_never_reaches_does_nothing(fresh_db, owner, tmp_path) -> None:
    done, trace = _run(fresh_db.app, tmp_path, **{CRASH_ENV: "upsert_dimension:4:before"})

    assert done.returncode == 0, done.stderr
    assert trace == ALL_COMMITS


@pytest.mark.parametrize(
    "spec",
    [
        "transition",
        "transition:1",
        "transition:0:after",
        "transition:-1:after",
        "transition:x:after",
        "transition:1:during",
        "Transition:1:after",
        "transition:1:after:again",
    ],
)
def test_a_malformed_crash_point_is_refused_at_install(spec, monkeypatch) -> None:
    monkeypatch.setenv(CRASH_ENV, spec)
    with pytest.raises(SettingsError, match="malformed"):
        install_from_env()
    assert state_module._commit_observer is None


def test_the_crash_hook_is_refused_in_prod(monkeypatch) -> None:
    monkeypatch.setenv(CRASH_ENV, "transition:1:after")
    monkeypatch.setenv("ENV", "prod")
    with pytest.raises(SettingsError, match="refused in prod"):
        install_from_env()
    assert state_module._commit_observer is None


def test_nothing_is_installed_without_the_variables(monkeypatch) -> None:
    monkeypatch.delenv(CRASH_ENV, raising=False)
    monkeypatch.delenv(TRACE_ENV, raising=False)
    assert install_from_env() is None
    assert state_module._commit_observer is None


def test_crash_point_round_trips() -> None:
    point = CrashPoint.parse("complete_job:12:before")
    assert (point.rpc, point.n, point.phase) == ("complete_job", 12, "before")
    assert str(point) == "complete_job:12:before"
