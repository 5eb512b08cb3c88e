"""The documented CLI lines (docs/getting-started.md, Running one asset for one partition) work
as written in a fresh shell: `bash` started with `env -i`, so no ENV, DAGSTER_HOME or Dagster
storage URL is set.

Beside PATH and HOME the shell gets only where to keep its data (MDAME_HOME, MDAME_DATABASE_URL,
MDAME_DAGSTER_DATABASE_URL, TMPDIR), so the test writes into scratch databases and a temp home,
not into the checkout's dev database. The dimensions are registered first, as `make demo`
leaves them (the page's stated precondition). The README keeps the two quick-start commands.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import psycopg
import pytest

from mdame_core.settings import REPO_ROOT

SECTION = "## Running one asset for one partition"
GETTING_STARTED = "docs/getting-started.md"


def doc_text(page: str) -> str:
    return (REPO_ROOT / page).read_text(encoding="utf-8")


def readme_block(section: str = SECTION, page: str = GETTING_STARTED) -> list[str]:
    """The indented command lines of a section of `page` (comments dropped)."""
    text = doc_text(page)
    body = text[text.index(section) :].split("\n## ", 1)[0]
    lines = [line[4:] for line in body.splitlines() if line.startswith("    ")]
    return [line for line in lines if line.strip() and not line.lstrip().startswith("#")]


def fresh_shell(
    script: str, env: dict[str, str], timeout: float = 600
) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["env", "-i", *(f"{k}={v}" for k, v in env.items()), "bash", "-c", script],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_the_readme_block_has_the_three_commands() -> None:
    lines = readme_block()
    assert lines[0].startswith('eval "$(.venv/bin/mdame env)"')
    materialize = [line for line in lines if "dagster asset materialize" in line]
    assert any("--select trends " in m for m in materialize)
    assert any("--select topics " in m for m in materialize)  # topics_safety runs with it
    assert any(line.startswith(".venv/bin/mdame backfill ") for line in lines)
    assert not any("--partition-range" in line for line in lines)


def test_readme_cli_lines_work_in_a_fresh_shell(shell_env) -> None:
    script = "set -e\n" + "\n".join(readme_block()) + "\n"
    done = fresh_shell(script, shell_env)
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-4000:]
    assert "mdame: ENV is not set: using dev" in output
    assert "Asset check 'topics_safety' on 'topics' passed" in output
    days = re.findall(r"^(2026-11-\d\d)\|tech  ok", done.stdout, flags=re.M)
    assert days == ["2026-11-27", "2026-11-28"], output[-2000:]
    assert "2/2 partitions succeeded" in done.stdout


def test_a_failing_mdame_env_makes_eval_fail_with_one_line(tmp_path: Path) -> None:
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "ENV": "staging"}
    done = fresh_shell('eval "$(.venv/bin/mdame env)" && echo went-on', env, timeout=60)
    assert done.returncode == 1 and "went-on" not in done.stdout
    assert done.stderr.strip().splitlines() == [
        "mdame: error: ENV='staging' is not allowed: it takes one of dev, prod"
    ]
    # Never a default to prod: unset ENV is dev, and prod only when asked for.
    done = fresh_shell(".venv/bin/mdame env", {**env, "ENV": ""}, timeout=60)
    assert "export ENV=dev" in done.stdout


def test_quick_start_is_two_commands() -> None:
    commands = [line.split("#")[0].strip() for line in readme_block("## Quick start", "README.md")]
    assert commands == ["make demo", "make test"]


def test_adding_a_niche_says_what_publishes_it() -> None:
    text = doc_text("docs/niches.md")
    section = text[text.index("## Adding a niche") :].split("\n## ", 1)[0]
    assert "only while the Dagster daemon runs" in section and "(`make ui`" in section
    assert "`make demo` syncs the files itself and publishes the new" in " ".join(section.split())


def test_dimensions_sync_registers_the_niche_files_as_the_admin_role(fresh_db, tmp_path) -> None:
    assert ".venv/bin/mdame dimensions sync" in doc_text("docs/niches.md")
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MDAME_DATABASE_URL": fresh_db.owner}
    done = fresh_shell(".venv/bin/mdame dimensions sync", env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "active: cooking, science, tech" in done.stdout
    with psycopg.connect(fresh_db.app) as app:
        registered = app.execute("SELECT slug FROM mdame.dimensions ORDER BY slug").fetchall()
        assert registered == [("cooking",), ("science",), ("tech",)]
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # not the pipeline's to do
            app.execute("SELECT mdame.upsert_dimension('tech', 'Tech', '{}', false)")


def test_other_env_checking_readme_commands_work_in_a_fresh_shell(fresh_db, tmp_path) -> None:
    documented = {
        ".venv/bin/mdame db url --role owner": "docs/operations.md",
        ".venv/bin/mdame db status": "docs/operations.md",
        ".venv/bin/python -m tests.chaos.main --help": "docs/architecture.md",
    }
    assert all(c in doc_text(page) for c, page in documented.items())
    commands = list(documented)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "MDAME_DATABASE_URL": fresh_db.owner}
    done = fresh_shell("set -e\n" + "\n".join(commands), env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "env: dev" in done.stdout and "clients will refuse" not in done.stdout
