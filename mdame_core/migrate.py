"""The migration runner: the versioned schema migrations, then the current functions.

sql/migrations/NNNN_name.sql are the schema changes, applied in order, append-only: each runs in
its own transaction and is recorded with its SHA-256 in mdame.schema_migrations. An applied
file that was edited, deleted or renamed stops the runner with a MigrationError naming the file:
history is never rewritten, a change is a new file.

sql/functions/<family>.sql hold the current definition of every function (and the triggers that
call them). They are repeatable: after the versioned migrations, every file whose SHA-256
differs from the one recorded (as functions/<family>.sql) runs again, all of them in one
transaction. A function is changed by editing its file; a versioned migration only drops one
whose signature or return type changes, or that is gone.

Per-change migrations can be squashed into a baseline: NNNN_name.squashed lists the files (and
their SHA-256) that NNNN_name.sql replaces. A database that applied all of them is recorded as
having applied the baseline instead, without running it: it already has that schema.

What the server says while a migration runs, at warning and above (a migration's RAISE WARNING
that tells the operator what it changed and what to do), goes to `notify`, with the file's name.

A session advisory lock keeps two migrators (two deploys, a cron tick and an operator) apart;
the files are read once, after taking it, and the bytes hashed are exactly the bytes executed.
The first migrate records ENV in mdame.environment; a later migrate with another ENV is refused.
A migration that adds a table without row-level security is rolled back, naming the table;
after a run, any table without it stops the runner.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg

from mdame_core.settings import ENVIRONMENTS, REPO_ROOT

MIGRATIONS_DIR = REPO_ROOT / "sql" / "migrations"
FUNCTIONS_DIR = REPO_ROOT / "sql" / "functions"
FILENAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")
FUNCTIONS_FILENAME = re.compile(r"^[a-z][a-z0-9_]*\.sql$")
# How a function file is recorded in mdame.schema_migrations, apart from the versioned files.
FUNCTIONS_PREFIX = "functions/"
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


@dataclass(frozen=True)
class Squash:
    """A baseline and the per-change files (name -> SHA-256) it replaced."""

    baseline: str
    replaced: dict[str, str]


def _read(path: Path, name: str | None = None) -> MigrationFile:
    content = path.read_bytes()
    return MigrationFile(name or path.name, path, hashlib.sha256(content).hexdigest(), content)


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
        files.append(_read(path))
    return files


def function_files(functions_dir: Path | None = None) -> list[MigrationFile]:
    """The function files, named as recorded (functions/<family>.sql), in name order."""
    directory = Path(functions_dir or FUNCTIONS_DIR)
    if not directory.is_dir():
        return []
    files = []
    for path in sorted(directory.glob("*.sql")):
        if not FUNCTIONS_FILENAME.match(path.name):
            raise MigrationError(f"{path.name}: function files are named lowercase_family.sql")
        files.append(_read(path, FUNCTIONS_PREFIX + path.name))
    return files


def squashes(migrations_dir: Path | None = None) -> list[Squash]:
    """Each NNNN_name.squashed: the lines "<file> <sha256>" that NNNN_name.sql replaced."""
    directory = Path(migrations_dir or MIGRATIONS_DIR)
    found = []
    for path in sorted(directory.glob("*.squashed")):
        baseline = path.with_suffix(".sql").name
        if not (directory / baseline).is_file():
            raise MigrationError(f"{path.name} names the baseline {baseline}, which is missing")
        replaced = {}
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if not line.strip() or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2 or not re.fullmatch(r"[0-9a-f]{64}", parts[1]):
                raise MigrationError(f"{path.name}:{number}: expected '<file> <sha256>'")
            replaced[parts[0]] = parts[1]
        found.append(Squash(baseline, replaced))
    return found


def migrations_digest(migrations_dir: Path | None = None) -> str:
    """One hash over every migration and function file and this runner (tests key template
    databases on it)."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    for f in migration_files(migrations_dir) + function_files():
        h.update(f.name.encode() + b"\0" + f.sha256.encode())
    for squash in squashes(migrations_dir):
        h.update(repr(sorted(squash.replaced.items())).encode())
    return h.hexdigest()


def migrate(
    owner_url: str,
    env: str,
    migrations_dir: Path | None = None,
    functions_dir: Path | None = None,
    notify: Callable[[str], None] | None = None,
) -> list[str]:
    """Apply pending migrations, then changed function files, as the owner; return the names
    applied (empty: up to date). `notify` gets what the server says at warning and above, as
    "<file>: <SEVERITY>: <message>"."""
    if env not in ENVIRONMENTS:
        raise MigrationError(f"ENV must be one of {', '.join(ENVIRONMENTS)} (got {env!r})")
    with psycopg.connect(owner_url, autocommit=True) as conn:
        # Session lock: held across the per-file transactions, released when we disconnect.
        conn.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        # Read under the lock: a file edited while we waited is hashed as it will run.
        files = migration_files(migrations_dir)
        functions = function_files(functions_dir)
        conn.execute("SET client_min_messages = warning")
        running = [""]  # the file being applied, for the notices it raises
        if notify is not None:
            report = notify

            def passed_on(diag: psycopg.errors.Diagnostic) -> None:
                report(f"{running[0]}: {diag.severity}: {diag.message_primary}")

            conn.add_notice_handler(passed_on)
        with conn.transaction():
            conn.execute(BOOTSTRAP)
        _check_environment(conn, env)
        rows = conn.execute("SELECT filename, sha256 FROM mdame.schema_migrations").fetchall()
        recorded: dict[str, str] = {filename: digest for filename, digest in rows}
        applied = {n: d for n, d in recorded.items() if not n.startswith(FUNCTIONS_PREFIX)}
        for squash in squashes(migrations_dir):
            applied = _adopt_baseline(conn, squash, files, applied)
        pending = _pending(files, applied)
        for f in pending:
            running[0] = f.name
            _apply(conn, f, env)
        running[0] = "functions"
        changed = _apply_functions(conn, functions, recorded)
        _check_environment(conn, env)
        missing = _tables_without_row_security(conn)
        if missing:
            raise MigrationError(
                f"table mdame.{missing[0]} has no row-level security; add a migration with "
                f"ALTER TABLE mdame.{missing[0]} ENABLE ROW LEVEL SECURITY and policies for "
                "mdame_app and mdame_admin"
            )
    return [f.name for f in pending] + changed


def _adopt_baseline(
    conn: psycopg.Connection, squash: Squash, files: list[MigrationFile], applied: dict[str, str]
) -> dict[str, str]:
    """A database that applied every file a baseline replaced is recorded as having applied the
    baseline; one that applied only some of them cannot be brought to it from here."""
    done = sorted(applied.keys() & squash.replaced.keys())
    if not done:
        return applied
    for name in done:
        if applied[name] != squash.replaced[name]:
            raise MigrationError(
                f"{name} was edited after it was applied (its recorded sha256 is not the one "
                f"{squash.baseline} replaced); this database's schema is not the baseline's"
            )
    missing = sorted(squash.replaced.keys() - applied.keys())
    if missing:
        raise MigrationError(
            f"this database applied the per-change migrations up to {done[-1]}, but not "
            f"{missing[0]} and {len(missing) - 1} more, which are now squashed into "
            f"{squash.baseline}; migrate it first with a release that still has them (any "
            "commit before the squash), then with this one"
        )
    baseline = next(f for f in files if f.name == squash.baseline)
    with conn.transaction():
        conn.execute("DELETE FROM mdame.schema_migrations WHERE filename = ANY(%s)", (done,))
        conn.execute(
            "INSERT INTO mdame.schema_migrations (filename, sha256) VALUES (%s, %s)",
            (baseline.name, baseline.sha256),
        )
    rest = {n: d for n, d in applied.items() if n not in squash.replaced}
    return rest | {baseline.name: baseline.sha256}


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


def _apply_functions(
    conn: psycopg.Connection, files: list[MigrationFile], recorded: dict[str, str]
) -> list[str]:
    """Run every function file that changed since it was recorded, in one transaction: twice,
    first without checking bodies (a SQL function may call one from a later file), then with,
    so each body is checked against functions that all exist. Forget files that are gone."""
    changed = [f for f in files if recorded.get(f.name) != f.sha256]
    names = {f.name for f in files}
    gone = sorted(n for n in recorded if n.startswith(FUNCTIONS_PREFIX) and n not in names)
    if not changed and not gone:
        return []
    with conn.transaction():
        for check_bodies in ("off", "on"):
            conn.execute(f"SET LOCAL check_function_bodies = {check_bodies}")
            for f in changed:
                try:
                    with conn.transaction():
                        conn.execute(f.content)
                except psycopg.Error as exc:
                    raise MigrationError(f"{f.name} failed: {_first_line(exc)}") from exc
        for f in changed:
            conn.execute(
                """INSERT INTO mdame.schema_migrations (filename, sha256) VALUES (%s, %s)
                   ON CONFLICT (filename)
                   DO UPDATE SET sha256 = excluded.sha256, applied_at = now()""",
                (f.name, f.sha256),
            )
        conn.execute("DELETE FROM mdame.schema_migrations WHERE filename = ANY(%s)", (gone,))
    return [f.name for f in changed]


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
