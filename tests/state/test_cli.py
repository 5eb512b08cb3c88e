"""The `mdame db ...` commands, run as a separate process like an operator would."""

from __future__ import annotations

import os
import subprocess
import sys

from mdame_core.settings import REPO_ROOT


def _mdame(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {**os.environ, "PYTHONPATH": str(REPO_ROOT), "ENV": "dev", **env}
    return subprocess.run(
        [sys.executable, "-m", "mdame_cli.main", *args],
        capture_output=True,
        text=True,
        env=environ,
        timeout=60,
    )


def test_db_url_prints_the_url_in_use(fresh_db) -> None:
    owner = _mdame("db", "url", "--role", "owner", MDAME_DATABASE_URL=fresh_db.owner)
    assert (owner.returncode, owner.stdout.strip()) == (0, fresh_db.owner)
    app = _mdame(
        "db", "url", MDAME_DATABASE_URL=fresh_db.owner, MDAME_APP_DATABASE_URL=fresh_db.app
    )
    assert app.stdout.strip() == fresh_db.app
    local = _mdame("db", "url", MDAME_DATABASE_URL="")
    assert local.returncode == 0 and local.stdout.startswith("postgresql://mdame_app@127.0.0.1:")


def test_db_migrate_and_status(empty_db) -> None:
    first = _mdame("db", "migrate", MDAME_DATABASE_URL=empty_db.owner)
    assert first.returncode == 0, first.stderr
    assert "applied 0028_baseline.sql" in first.stdout
    assert "applied functions/jobs.sql" in first.stdout
    again = _mdame("db", "migrate", MDAME_DATABASE_URL=empty_db.owner)
    assert (again.returncode, again.stdout.strip()) == (0, "up to date")
    status = _mdame("db", "status", MDAME_DATABASE_URL=empty_db.owner)
    assert status.returncode == 0, status.stderr
    assert "functions/phases.sql" in status.stdout
    assert "env: dev" in status.stdout
    assert any(line.split() == ["work_kinds", "7"] for line in status.stdout.splitlines())


def test_errors_are_one_line_without_traceback(fresh_db) -> None:
    wrong_env = _mdame("db", "migrate", MDAME_DATABASE_URL=fresh_db.owner, ENV="prod")
    assert wrong_env.returncode == 1
    assert wrong_env.stderr.strip().splitlines() == [
        "mdame: error: this database belongs to ENV=dev; refusing to migrate it with ENV=prod"
    ]
    # The CLI takes an unset ENV as dev, like the Makefile (never prod): this dev database.
    no_env = _mdame("db", "migrate", MDAME_DATABASE_URL=fresh_db.owner, ENV="")
    assert (no_env.returncode, no_env.stdout.strip()) == (0, "up to date"), no_env.stderr
    unknown_env = _mdame("db", "migrate", MDAME_DATABASE_URL=fresh_db.owner, ENV="production")
    assert unknown_env.returncode == 1
    assert unknown_env.stderr.strip().splitlines() == [
        "mdame: error: ENV='production' is not allowed: it takes one of dev, prod"
    ]
    unreachable = _mdame("db", "status", MDAME_DATABASE_URL="postgresql://x@127.0.0.1:1/none")
    assert unreachable.returncode == 1
    assert len(unreachable.stderr.strip().splitlines()) == 1
