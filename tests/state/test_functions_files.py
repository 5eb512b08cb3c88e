"""The current SQL in one place: every function lives in one file under sql/functions/, applied
after the versioned migrations whenever it changes; a database built by the per-change
migrations that the baseline squashed upgrades to the same state as a fresh one."""

from __future__ import annotations

import re
import shutil
import tarfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from mdame_core.migrate import (
    FUNCTIONS_DIR,
    MIGRATIONS_DIR,
    MigrationError,
    function_files,
    migrate,
    migration_files,
)
from tests.scratch_db import DbUrls, create_database, drop_database
from tests.state.catalog import differences, snapshot

LEGACY = Path(__file__).parent / "fixtures" / "migrations_0001_0028.tar.xz"


@pytest.fixture
def legacy_migrations(tmp_path: Path) -> Path:
    """The per-change migrations 0001-0028 as they shipped before the squash."""
    target = tmp_path / "legacy"
    with tarfile.open(LEGACY) as archive:
        archive.extractall(target, filter="data")
    return target


@pytest.fixture
def second_db(cluster: None) -> Iterator[DbUrls]:
    db = create_database(None, "second")
    try:
        yield db
    finally:
        drop_database(db.name)


@pytest.fixture
def functions(tmp_path: Path) -> Path:
    """A private copy of sql/functions that a test may edit."""
    target = tmp_path / "functions"
    shutil.copytree(FUNCTIONS_DIR, target)
    return target


def _migrated_by_legacy(url: str, legacy: Path, tmp_path: Path) -> list[str]:
    nothing = tmp_path / "no_functions"
    nothing.mkdir(exist_ok=True)
    return migrate(url, "dev", legacy, nothing)


def test_an_old_database_upgrades_to_the_state_of_a_fresh_one(
    empty_db, second_db, legacy_migrations, tmp_path
) -> None:
    applied = _migrated_by_legacy(empty_db.owner, legacy_migrations, tmp_path)
    assert len(applied) == 27 and applied[0] == "0001_schema.sql"
    with psycopg.connect(empty_db.owner, autocommit=True) as conn:
        # Work the old database did is kept through the upgrade.
        conn.execute("SELECT mdame.upsert_dimension('tech', 'Tech', '{}'::jsonb, true)")
    upgraded = migrate(empty_db.owner, "dev")
    after_baseline = [f.name for f in migration_files() if f.name > "0028_baseline.sql"]
    assert upgraded == after_baseline + [f.name for f in function_files()]
    assert migrate(second_db.owner, "dev")[0] == "0028_baseline.sql"
    with psycopg.connect(empty_db.owner) as conn:
        recorded = conn.execute(
            "SELECT filename FROM mdame.schema_migrations WHERE filename !~ '/' ORDER BY 1"
        ).fetchall()
        kept = conn.execute("SELECT slug FROM mdame.dimensions").fetchall()
    assert recorded == [("0028_baseline.sql",), *((name,) for name in after_baseline)]
    assert kept == [("tech",)]
    assert differences(snapshot(empty_db.owner), snapshot(second_db.owner)) == {}
    assert migrate(empty_db.owner, "dev") == []


def test_an_old_database_part_way_through_the_squashed_files_is_refused(
    empty_db, legacy_migrations, tmp_path
) -> None:
    for late in sorted(legacy_migrations.glob("*.sql"))[20:]:
        late.unlink()
    _migrated_by_legacy(empty_db.owner, legacy_migrations, tmp_path)
    with pytest.raises(MigrationError) as err:
        migrate(empty_db.owner, "dev")
    message = str(err.value)
    assert "applied the per-change migrations up to 0021_one_publisher_protocol.sql" in message
    assert "not 0022_voice_heals.sql and 6 more" in message
    assert "0028_baseline.sql" in message and "migrate it first with a release" in message
    with psycopg.connect(empty_db.owner) as conn:
        (count,) = conn.execute("SELECT count(*) FROM mdame.schema_migrations").fetchone()
    assert count == 20


def test_an_old_database_with_an_edited_squashed_file_is_refused(
    empty_db, legacy_migrations, tmp_path
) -> None:
    edited = legacy_migrations / "0015_alerts.sql"
    edited.write_text(edited.read_text() + "\n-- edited\n")
    _migrated_by_legacy(empty_db.owner, legacy_migrations, tmp_path)
    with pytest.raises(MigrationError, match=r"0015_alerts\.sql was edited after it was applied"):
        migrate(empty_db.owner, "dev")


def _defined_in_files(directory: Path) -> list[tuple[str, str, str]]:
    """(name, identity arguments, file) of every CREATE FUNCTION in the function files."""
    found = []
    header = re.compile(r"^CREATE OR REPLACE FUNCTION mdame\.([a-z_0-9]+)\(", re.M)
    for path in sorted(directory.glob("*.sql")):
        text = path.read_text()
        for match in header.finditer(text):
            found.append((match.group(1), _identity(text, match.end()), path.name))
    return found


def _identity(text: str, start: int) -> str:
    """The parameter list opened at `start`, without defaults, as pg_proc prints it."""
    depth, quoted, end = 1, False, start
    while depth:
        char = text[end]
        if char == "'":
            quoted = not quoted
        elif not quoted and char in "()":
            depth += 1 if char == "(" else -1
        end += 1
    params, depth, quoted, current = [], 0, False, ""
    for char in text[start : end - 1]:
        if char == "'":
            quoted = not quoted
        if not quoted and char in "()":
            depth += 1 if char == "(" else -1
        if char == "," and depth == 0 and not quoted:
            params.append(current)
            current = ""
        else:
            current += char
    if current.strip():
        params.append(current)
    return ", ".join(re.sub(r"\s+DEFAULT\s.*$", "", p.strip(), flags=re.S) for p in params)


def test_every_function_is_defined_in_exactly_one_function_file(owner) -> None:
    in_files = _defined_in_files(FUNCTIONS_DIR)
    in_database = owner.execute(
        """SELECT proname, pg_get_function_identity_arguments(oid) FROM pg_proc
            WHERE pronamespace = 'mdame'::regnamespace"""
    ).fetchall()
    files_of: dict[tuple[str, str], list[str]] = {}
    for name, identity, file in in_files:
        files_of.setdefault((name, identity), []).append(file)
    twice = {k: v for k, v in files_of.items() if len(v) > 1}
    assert not twice, f"defined in more than one place: {twice}"
    missing = sorted(set(in_database) - set(files_of))
    assert not missing, f"in the database but in no file under sql/functions/: {missing}"
    stale = sorted(set(files_of) - set(in_database))
    assert not stale, f"in a function file but not in the database: {stale}"
    versioned = [
        p.name
        for p in MIGRATIONS_DIR.glob("*.sql")
        if re.search(r"^CREATE (OR REPLACE )?FUNCTION", p.read_text(), re.M | re.I)
    ]
    assert not versioned, f"versioned migrations define functions: {versioned}"


def test_the_one_file_check_finds_a_function_defined_twice(functions) -> None:
    copy = (functions / "jobs.sql").read_text()
    (functions / "zz_copy.sql").write_text(copy)
    names = [(n, i) for n, i, _ in _defined_in_files(functions)]
    assert len(names) > len(set(names))


def test_a_changed_function_file_runs_again_and_is_recorded(empty_db, functions) -> None:
    migrate(empty_db.owner, "dev", functions_dir=functions)
    clock = functions / "reads_extra.sql"
    clock.write_text(
        "SET LOCAL search_path = mdame, pg_temp;\n"
        "CREATE OR REPLACE FUNCTION mdame.answer() RETURNS int LANGUAGE sql AS $$ SELECT 41 $$;\n"
    )
    assert migrate(empty_db.owner, "dev", functions_dir=functions) == ["functions/reads_extra.sql"]
    clock.write_text(clock.read_text().replace("41", "42"))
    assert migrate(empty_db.owner, "dev", functions_dir=functions) == ["functions/reads_extra.sql"]
    assert migrate(empty_db.owner, "dev", functions_dir=functions) == []
    with psycopg.connect(empty_db.owner) as conn:
        assert conn.execute("SELECT mdame.answer()").fetchone() == (42,)


def test_a_function_may_call_one_from_a_file_applied_after_it(empty_db, functions) -> None:
    """A SQL function's body is checked when it is created: the runner creates every changed
    file's functions before it checks them."""
    (functions / "aa_first.sql").write_text(
        "CREATE OR REPLACE FUNCTION mdame.doubled() RETURNS int LANGUAGE sql\n"
        "AS $$ SELECT 2 * mdame.base_value() $$;\n"
    )
    (functions / "zz_last.sql").write_text(
        "CREATE OR REPLACE FUNCTION mdame.base_value() RETURNS int LANGUAGE sql\n"
        "AS $$ SELECT 21 $$;\n"
    )
    migrate(empty_db.owner, "dev", functions_dir=functions)
    with psycopg.connect(empty_db.owner) as conn:
        assert conn.execute("SELECT mdame.doubled()").fetchone() == (42,)


def test_a_broken_function_file_is_named_and_changes_nothing(empty_db, functions) -> None:
    migrate(empty_db.owner, "dev", functions_dir=functions)
    (functions / "aa_fine.sql").write_text(
        "CREATE OR REPLACE FUNCTION mdame.fine() RETURNS int LANGUAGE sql AS $$ SELECT 1 $$;\n"
    )
    (functions / "zz_broken.sql").write_text(
        "CREATE OR REPLACE FUNCTION mdame.broken() RETURNS int LANGUAGE sql\n"
        "AS $$ SELECT no_such_column FROM mdame.jobs $$;\n"
    )
    with pytest.raises(MigrationError, match=r"functions/zz_broken\.sql failed: .*no_such_column"):
        migrate(empty_db.owner, "dev", functions_dir=functions)
    with psycopg.connect(empty_db.owner) as conn:
        assert conn.execute("SELECT to_regproc('mdame.fine')").fetchone() == (None,)
        (recorded,) = conn.execute(
            "SELECT count(*) FROM mdame.schema_migrations WHERE filename ~ '^functions/(aa|zz)'"
        ).fetchone()
    assert recorded == 0
