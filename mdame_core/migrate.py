"""The migration runner: applies sql/migrations/NNNN_name.sql in order, append-only.

Each file runs in its own transaction and is recorded with its SHA-256 in
mdame.schema_migrations. An applied file that was edited, deleted or renamed stops the runner
with a MigrationError naming the file: history is never rewritten, a change is a new file.
A session advisory lock keeps two migrators (two deploys, a cron tick and an operator) apart;
the files are read once, after taking it, and the bytes hashed are exactly the bytes executed.
The first migrate records ENV in mdame.environment; a later migrate with another ENV is refused.
Once every table has row-level security (0003), a migration that adds a table without it is
rolled back, naming the table; after a run, any table without it stops the runner.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path

import psycopg

from mdame_core.settings import ENVIRONMENTS, REPO_ROOT

MIGRATIONS_DIR = REPO_ROOT / "sql" / "migrations"
FILENAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
# pg_advisory_lock key: "mdame" as an integer, so it cannot collide with a small app-chosen key.
LOCK_KEY = int.from_bytes(b"mdame-mg", "big") & 0x7FFFFFFFFFFFFFFF

BOOTSTRAP = """
CREATE SCHEMA IF NOT EXISTS mdame;
CREATE TABLE IF NOT EXISTS mdame.schema_migrations (
  filename   text PRIMARY KEY,
  sha256     text NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
  applied_at timestamptz NOT NULL DEFAULT now()
);
"""


class MigrationError(RuntimeError):
    """Migrations cannot be applied; the message names the file and what to do."""


@dataclass(frozen=True)
class MigrationFile:
    name: str
    path: Path
    sha256: str
    content: bytes  # read once: what is hashed is what runs, even if the file changes later


def migration_files(migrations_dir: Path | None = None) -> list[MigrationFile]:
    """The migration files in apply order; a stray or duplicate-numbered .sql file is refused."""
    directory = Path(migrations_dir or MIGRATIONS_DIR)
    if not directory.is_dir():
        raise MigrationError(f"migrations directory {directory} does not exist")
    files: list[MigrationFile] = []
    seen: dict[str, str] = {}
    for path in sorted(directory.glob("*.sql")):
        match = FILENAME.match(path.name)
        if not match:
            raise MigrationError(f"{path.name}: migration files are named NNNN_lowercase_name.sql")
        number = match.group(1)
        if number in seen:
            raise MigrationError(f"{path.name}: number {number} is also used by {seen[number]}")
        seen[number] = path.name
        content = path.read_bytes()
        files.append(MigrationFile(path.name, path, hashlib.sha256(content).hexdigest(), content))
    return files


def migrations_digest(migrations_dir: Path | None = None) -> str:
    """One hash over every migration file and this runner (tests key template databases on it)."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    for f in migration_files(migrations_dir):
        h.update(f.name.encode() + b"\0" + f.sha256.encode())
    return h.hexdigest()


def migrate(owner_url: str, env: str, migrations_dir: Path | None = None) -> list[str]:
    """Apply pending migrations as the owner; return the names applied (empty: up to date)."""
    if env not in ENVIRONMENTS:
        raise MigrationError(f"ENV must be one of {', '.join(ENVIRONMENTS)} (got {env!r})")
    with psycopg.connect(owner_url, autocommit=True) as conn:
        # Session lock: held across the per-file transactions, released when we disconnect.
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        # Read under the lock: a file edited while we waited is hashed as it will run.
        files = migration_files(migrations_dir)
        conn.execute("SET client_min_messages = warning")
        with conn.transaction():
            conn.execute(BOOTSTRAP)
        _check_environment(conn, env)
        rows = conn.execute("SELECT filename, sha256 FROM mdame.schema_migrations").fetchall()
        applied: dict[str, str] = {filename: digest for filename, digest in rows}
        pending = _pending(files, applied)
        for f in pending:
            _apply(conn, f, env)
        _check_environment(conn, env)
        missing = _tables_without_row_security(conn)
        if missing:
            raise MigrationError(
                f"table mdame.{missing[0]} has no row-level security; add a migration with "
                f"ALTER TABLE mdame.{missing[0]} ENABLE ROW LEVEL SECURITY and policies for "
                "mdame_app and mdame_admin"
            )
    return [f.name for f in pending]


def _pending(files: list[MigrationFile], applied: dict[str, str]) -> list[MigrationFile]:
    """Verify the applied history is intact and return the files still to apply."""
    by_name = {f.name: f for f in files}
    for name, digest in sorted(applied.items()):
        f = by_name.get(name)
        if f is None:
            raise MigrationError(
                f"{name} was applied but is missing from the migrations directory "
                "(deleted or renamed); restore it: applied migrations are append-only"
            )
        if f.sha256 != digest:
            raise MigrationError(
                f"{name} was edited after it was applied (sha256 {digest[:12]}... recorded, "
                f"{f.sha256[:12]}... on disk); revert it and put the change in a new migration"
            )
    pending = [f for f in files if f.name not in applied]
    if pending and applied and pending[0].name < max(applied):
        raise MigrationError(
            f"{pending[0].name} sorts before the already applied {max(applied)}; "
            "give it a higher number"
        )
    return pending


def _apply(conn: psycopg.Connection, f: MigrationFile, env: str) -> None:
    # Row security is the baseline once every table has it: from then on a migration may not
    # add a table without it (checked before its commit, so such a migration changes nothing).
    guarded = not _tables_without_row_security(conn)
    try:
        with conn.transaction():
            conn.execute(f.content)  # no parameters: sent as one multi-statement script
            missing = _tables_without_row_security(conn) if guarded else []
            if missing:
                raise MigrationError(
                    f"{f.name} creates table mdame.{missing[0]} without row-level security; "
                    f"add ALTER TABLE mdame.{missing[0]} ENABLE ROW LEVEL SECURITY and a "
                    "policy for mdame_app (and GRANT SELECT if the app may read it) and one for "
                    "mdame_admin"
                )
            conn.execute(
                "INSERT INTO mdame.schema_migrations (filename, sha256) VALUES (%s, %s)",
                (f.name, f.sha256),
            )
            # Record ENV in the same transaction as the migration that creates the table.
            if _has_environment_table(conn):
                conn.execute(
                    "INSERT INTO mdame.environment (env) VALUES (%s) ON CONFLICT DO NOTHING",
                    (env,),
                )
    except psycopg.Error as exc:
        raise MigrationError(f"{f.name} failed: {_first_line(exc)}") from exc


def _tables_without_row_security(conn: psycopg.Connection) -> list[str]:
    rows = conn.execute(
        """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'mdame' AND c.relkind IN ('r', 'p') AND NOT c.relrowsecurity
            ORDER BY 1"""
    ).fetchall()
    return [r[0] for r in rows]


def _has_environment_table(conn: psycopg.Connection) -> bool:
    row = conn.execute("SELECT to_regclass('mdame.environment') IS NOT NULL").fetchone()
    return bool(row and row[0])


def _check_environment(conn: psycopg.Connection, env: str) -> None:
    if not _has_environment_table(conn):
        return
    row = conn.execute("SELECT env FROM mdame.environment").fetchone()
    if row and row[0] != env:
        raise MigrationError(
            f"this database belongs to ENV={row[0]}; refusing to migrate it with ENV={env}"
        )


def _first_line(exc: psycopg.Error) -> str:
    diag = exc.diag
    message = diag.message_primary or str(exc).splitlines()[0]
    where = f" ({diag.context.splitlines()[0]})" if diag.context else ""
    return message + where
