"""The migration runner: ordered, recorded, append-only, one ENV per database."""

from __future__ import annotations

import hashlib
import shutil
import threading
import time
from pathlib import Path

import psycopg
import pytest

from mdame_core.migrate import (
    LOCK_KEY,
    MIGRATIONS_DIR,
    MigrationError,
    function_files,
    migrate,
    migration_files,
)


@pytest.fixture
def migrations(tmp_path: Path) -> Path:
    """A private copy of the migrations directory that a test may edit."""
    target = tmp_path / "migrations"
    shutil.copytree(MIGRATIONS_DIR, target)
    return target


def _names() -> list[str]:
    return [f.name for f in migration_files() + function_files()]


def test_applies_in_order_records_checksums_then_is_up_to_date(empty_db) -> None:
    assert migrate(empty_db.owner, "dev") == _names()
    assert migrate(empty_db.owner, "dev") == []
    with psycopg.connect(empty_db.owner) as conn:
        rows = conn.execute(
            "SELECT filename, sha256 FROM mdame.schema_migrations ORDER BY filename"
        ).fetchall()
        env = conn.execute("SELECT env FROM mdame.environment").fetchone()
    expected = [
        (f.name, hashlib.sha256(f.path.read_bytes()).hexdigest())
        for f in (migration_files() + function_files())
    ]
    assert rows == sorted(expected)
    assert env == ("dev",)


def test_edited_applied_migration_is_refused_naming_the_file(empty_db, migrations) -> None:
    migrate(empty_db.owner, "dev", migrations)
    edited = migrations / "0028_baseline.sql"
    edited.write_text(edited.read_text() + "\n-- a harmless-looking edit\n")
    with pytest.raises(MigrationError, match=r"0028_baseline\.sql was edited after it was applied"):
        migrate(empty_db.owner, "dev", migrations)


def test_missing_or_renamed_applied_migration_is_refused(empty_db, migrations) -> None:
    (migrations / "0900_notes.sql").write_text("SELECT 1;\n")
    migrate(empty_db.owner, "dev", migrations)
    (migrations / "0900_notes.sql").rename(migrations / "0900_remarks.sql")
    with pytest.raises(MigrationError, match=r"0900_notes\.sql was applied but is missing"):
        migrate(empty_db.owner, "dev", migrations)


def test_new_migration_is_applied_and_a_failing_one_changes_nothing(empty_db, migrations):
    migrate(empty_db.owner, "dev", migrations)
    # Numbered past the project's own migrations, whatever their count.
    (migrations / "0900_notes.sql").write_text(
        "CREATE TABLE mdame.notes (id bigserial PRIMARY KEY, body text NOT NULL);\n"
        "ALTER TABLE mdame.notes ENABLE ROW LEVEL SECURITY;\n"
    )
    assert migrate(empty_db.owner, "dev", migrations) == ["0900_notes.sql"]
    (migrations / "0901_broken.sql").write_text(
        "CREATE TABLE mdame.half (id int);\nSELECT 1 / 0;\n"
    )
    with pytest.raises(MigrationError, match=r"0901_broken\.sql failed: division by zero"):
        migrate(empty_db.owner, "dev", migrations)
    with psycopg.connect(empty_db.owner) as conn:
        assert conn.execute("SELECT to_regclass('mdame.half')").fetchone() == (None,)
        (count,) = conn.execute("SELECT count(*) FROM mdame.schema_migrations").fetchone()
    assert count == len(_names()) + 1


def test_out_of_order_and_misnamed_files_are_refused(empty_db, migrations) -> None:
    (migrations / "0990_last.sql").write_text("SELECT 1;\n")
    migrate(empty_db.owner, "dev", migrations)
    (migrations / "0980_late.sql").write_text("SELECT 1;\n")
    with pytest.raises(MigrationError, match=r"0980_late\.sql sorts before"):
        migrate(empty_db.owner, "dev", migrations)
    (migrations / "0980_late.sql").unlink()
    (migrations / "10_bad-name.sql").write_text("SELECT 1;\n")
    with pytest.raises(MigrationError, match=r"10_bad-name\.sql"):
        migrate(empty_db.owner, "dev", migrations)


def test_other_env_is_refused(empty_db) -> None:
    migrate(empty_db.owner, "prod")
    with pytest.raises(MigrationError, match="belongs to ENV=prod"):
        migrate(empty_db.owner, "dev")
    with pytest.raises(MigrationError, match="ENV must be one of"):
        migrate(empty_db.owner, "staging")


def test_two_concurrent_migrators_do_not_race(empty_db) -> None:
    results: list[object] = []

    def run() -> None:
        try:
            results.append(migrate(empty_db.owner, "dev"))
        except Exception as exc:  # reported below
            results.append(exc)

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(results, key=len) == [[], [], _names()]


def test_the_bytes_hashed_are_the_bytes_run_when_a_file_changes_while_waiting(
    empty_db, migrations
) -> None:
    """Files are read once, after the migration lock: an edit made while a migrator waits for
    the lock is what runs, and what is recorded."""
    migrate(empty_db.owner, "dev", migrations)
    new = migrations / "0900_v.sql"
    new.write_text(
        "CREATE TABLE mdame.v1 (id int);\nALTER TABLE mdame.v1 ENABLE ROW LEVEL SECURITY;\n"
    )
    results: list[object] = []
    with psycopg.connect(empty_db.owner, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        waiter = threading.Thread(
            target=lambda: results.append(migrate(empty_db.owner, "dev", migrations))
        )
        waiter.start()
        for _ in range(200):  # until the migrator waits on the advisory lock
            (waiting,) = holder.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone()
            if waiting:
                break
            time.sleep(0.05)
        assert waiting, "the migrator never waited for the lock"
        edited = (
            b"CREATE TABLE mdame.v2 (id int);\nALTER TABLE mdame.v2 ENABLE ROW LEVEL SECURITY;\n"
        )
        new.write_bytes(edited)
        holder.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
        waiter.join(30)
    assert results == [["0900_v.sql"]]
    with psycopg.connect(empty_db.owner) as conn:
        (recorded,) = conn.execute(
            "SELECT sha256 FROM mdame.schema_migrations WHERE filename = '0900_v.sql'"
        ).fetchone()
        tables = conn.execute(
            "SELECT to_regclass('mdame.v1') IS NULL, to_regclass('mdame.v2') IS NOT NULL"
        ).fetchone()
    assert recorded == hashlib.sha256(edited).hexdigest()
    assert tables == (True, True)
    new.write_bytes(edited + b"-- edited after it was applied\n")
    with pytest.raises(MigrationError, match=r"0900_v\.sql was edited after it was applied"):
        migrate(empty_db.owner, "dev", migrations)


def test_a_new_table_without_row_security_is_refused_naming_it(empty_db, migrations) -> None:
    migrate(empty_db.owner, "dev", migrations)
    (migrations / "0900_open.sql").write_text("CREATE TABLE mdame.wide_open (id int);\n")
    with pytest.raises(MigrationError, match=r"0900_open\.sql creates table mdame\.wide_open"):
        migrate(empty_db.owner, "dev", migrations)
    with psycopg.connect(empty_db.owner, autocommit=True) as conn:
        assert conn.execute("SELECT to_regclass('mdame.wide_open')").fetchone() == (None,)
        # A table slipped in by hand (not by a migration) stops the runner too.
        conn.execute("CREATE TABLE mdame.by_hand (id int)")
    (migrations / "0900_open.sql").unlink()
    with pytest.raises(MigrationError, match=r"mdame\.by_hand has no row-level security"):
        migrate(empty_db.owner, "dev", migrations)


def test_truncating_the_environment_is_refused_and_migrate_keeps_the_env(empty_db) -> None:
    migrate(empty_db.owner, "prod")
    with psycopg.connect(empty_db.owner, autocommit=True) as conn:
        with pytest.raises(psycopg.Error, match="recorded once") as err:
            conn.execute("TRUNCATE mdame.environment")
        assert err.value.sqlstate == "MD001"
        assert conn.execute("SELECT env FROM mdame.environment").fetchall() == [("prod",)]
    with pytest.raises(MigrationError, match="belongs to ENV=prod"):
        migrate(empty_db.owner, "dev")
    assert migrate(empty_db.owner, "prod") == []
