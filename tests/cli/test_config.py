"""`mdame config`: every declared setting, its effective value and its source, secrets masked,
bad values marked; and the start-up validation every other command runs first. The commands
run as an operator runs them, `.venv/bin/mdame` in a shell started with `env -i`, so only the
variables a test sets are set."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from mdame_core.settings import REPO_ROOT, Settings

MDAME = str(REPO_ROOT / ".venv" / "bin" / "mdame")
ROW = re.compile(r"^([ !]) ([A-Z][A-Z0-9_]+) +(environment|default) +(.*)$")
SECRET = "gem-key-7f3a9c-not-for-print"
DB_PASSWORD = "db-pass-41e0-not-for-print"


def mdame(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {"PATH": os.environ["PATH"], "HOME": str(home), "MDAME_HOME": str(home), **env}
    return subprocess.run(
        [MDAME, *args], env=environ, capture_output=True, text=True, timeout=60, cwd=home
    )


def table(stdout: str) -> dict[str, tuple[str, str, str]]:
    """The rows by variable: (mark, source, value)."""
    rows: dict[str, tuple[str, str, str]] = {}
    for line in stdout.splitlines():
        match = ROW.match(line)
        if match:
            mark, name, source, value = match.groups()
            assert name not in rows, f"{name} listed twice"
            rows[name] = (mark, source, value)
    return rows


def test_the_table_lists_exactly_the_declared_variables(tmp_path: Path) -> None:
    done = mdame(tmp_path, "config")
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    rows = table(done.stdout)
    assert sorted(rows) == sorted(Settings.model_fields)
    set_here = {name for name, (_, source, _) in rows.items() if source == "environment"}
    assert set_here == {"MDAME_HOME"} and rows["MDAME_HOME"] == (" ", "environment", str(tmp_path))
    assert all(mark == " " for mark, _, _ in rows.values())
    # ENV is the command's own default (dev), not something the shell set.
    assert rows["ENV"] == (" ", "default", "dev")
    # 100 columns, but for a value longer than the room left (this test's home folder).
    wide = [line for line in done.stdout.splitlines() if len(line) > 100]
    assert all(str(tmp_path) in line for line in wide), wide
    # No MDAME_DATABASE_URL: the local cluster, here not started (no pg.env in this home).
    assert f"in use: the local cluster, not started: `make db` (it writes {tmp_path}/pg.env)" in (
        " ".join(done.stdout.split())
    )


def test_set_variables_show_their_source_and_secrets_stay_masked(tmp_path: Path) -> None:
    (tmp_path / "pg.env").write_text("MDAME_PG_PORT=54999\n")
    env = {
        "MDAME_LOCK_TTL_S": "7.5",
        "GEMINI_API_KEY": SECRET,
        "MDAME_CELERY_BROKER_URL": f"redis://:{DB_PASSWORD}@127.0.0.1:6379/0",
        "ENV": "dev",
    }
    done = mdame(tmp_path, "config", "--long", **env)
    assert done.returncode == 0, done.stderr
    rows = table(done.stdout)
    assert rows["MDAME_LOCK_TTL_S"] == (" ", "environment", "7.5")
    assert rows["ENV"] == (" ", "environment", "dev")
    assert rows["GEMINI_API_KEY"] == (" ", "environment", "****** (set)")
    assert rows["MDAME_CELERY_BROKER_URL"] == (" ", "environment", "****** (set)")
    assert rows["MDAME_STEP_RETRIES"] == (" ", "default", "4")
    for secret in (SECRET, DB_PASSWORD):
        assert secret not in done.stdout + done.stderr
    # --long: each description under its row.
    assert "    A pipeline lock's lease; a killed holder's lock is free after it" in done.stdout
    assert "in use: the local cluster postgresql://mdame_owner@127.0.0.1:54999/mdame" in (
        done.stdout
    )

    only_set = mdame(tmp_path, "config", "--set", **env)
    assert sorted(table(only_set.stdout)) == sorted([*env, "MDAME_HOME"])

    external = f"postgresql://mdame_owner:{DB_PASSWORD}@db.example.org:5432/mdame"
    done = mdame(tmp_path, "config", "--set", MDAME_DATABASE_URL=external)
    assert table(done.stdout)["MDAME_DATABASE_URL"] == (" ", "environment", "****** (set)")
    assert "in use: an external database: MDAME_DATABASE_URL, as its owner" in done.stdout
    assert DB_PASSWORD not in done.stdout + done.stderr


def test_a_bad_value_is_marked_and_named_and_the_command_exits_1(tmp_path: Path) -> None:
    done = mdame(
        tmp_path,
        "config",
        MDAME_LOCK_TTL_S="soon",
        MDAME_GPU_EXECUTOR="gpu",
        GEMINI_API_KEY=SECRET,
    )
    assert done.returncode == 1
    rows = table(done.stdout)
    assert sorted(rows) == sorted(Settings.model_fields)  # the whole table still prints
    assert rows["MDAME_LOCK_TTL_S"] == ("!", "environment", "soon (refused)")
    assert rows["MDAME_GPU_EXECUTOR"] == ("!", "environment", "gpu (refused)")
    assert sorted(name for name, (mark, _, _) in rows.items() if mark == "!") == [
        "MDAME_GPU_EXECUTOR",
        "MDAME_LOCK_TTL_S",
    ]
    assert sorted(done.stderr.strip().splitlines()) == [
        "mdame: error: MDAME_GPU_EXECUTOR='gpu' is not allowed: it takes one of in_process, "
        "multiprocess, celery, k8s",
        "mdame: error: MDAME_LOCK_TTL_S='soon' is not allowed: it takes a number > 0, in s",
    ]
    assert SECRET not in done.stdout + done.stderr


def test_json_has_the_same_rows(tmp_path: Path) -> None:
    done = mdame(tmp_path, "config", "--json", GEMINI_API_KEY=SECRET, MDAME_STEP_RETRIES="x")
    assert done.returncode == 1
    answer = json.loads(done.stdout)
    variables = {row["name"]: row for row in answer["variables"]}
    assert sorted(variables) == sorted(Settings.model_fields)
    assert variables["GEMINI_API_KEY"]["value"] == "****** (set)"
    assert variables["GEMINI_API_KEY"]["source"] == "environment"
    assert variables["MDAME_LOCK_TTL_S"]["source"] == "default"
    assert variables["MDAME_STEP_RETRIES"]["problem"].startswith("MDAME_STEP_RETRIES='x' is not")
    assert answer["problems"] == [variables["MDAME_STEP_RETRIES"]["problem"]]
    assert answer["database"].startswith("the local cluster")
    assert SECRET not in done.stdout + done.stderr


@pytest.mark.parametrize("command", [["db", "url"], ["env"], ["doctor", "--only", "disk"]])
def test_every_command_refuses_a_bad_value_before_it_starts(
    tmp_path: Path, command: list[str]
) -> None:
    done = mdame(tmp_path, *command, MDAME_LOCK_TTL_S="soon", MDAME_FIRST_DAY="20261101")
    assert done.returncode == 1
    errors = [line for line in done.stderr.splitlines() if line.startswith("mdame: error:")]
    assert sorted(errors) == [
        "mdame: error: MDAME_FIRST_DAY='20261101' is not allowed: it takes a date YYYY-MM-DD",
        "mdame: error: MDAME_LOCK_TTL_S='soon' is not allowed: it takes a number > 0, in s",
    ]
    # Nothing ran: no URL, no exports, no doctor table; `eval "$(mdame env)"` fails.
    assert done.stdout.strip() == ("false" if command == ["env"] else "")
    assert "Traceback" not in done.stderr
