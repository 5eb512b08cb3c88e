"""database, migrations, roles: the database reachable with the app URL and of this ENV, every
migration and function file applied with the checksum the runner recorded, and the app role as
it should be (not a superuser, no BYPASSRLS, no table writes, RLS on every table with a read
policy for it). The active dimensions are read here for the checks after it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import psycopg

from mdame_cli.doctor.context import Doctor
from mdame_core import settings
from mdame_domain.doctor import Status, first_line, migration_problems


@contextlib.contextmanager
def _app_connection(doctor: Doctor) -> Iterator[psycopg.Connection]:
    url = settings.database_url("app")
    with psycopg.connect(
        url, autocommit=True, connect_timeout=max(1, int(doctor.options.timeout_s))
    ) as conn:
        if conn.info.user != settings.APP_ROLE and doctor.env == "dev":
            # dev may use the owner's login and drop to the app role (settings.database_url).
            conn.execute(f"SET ROLE {settings.APP_ROLE}")
        yield conn


def check_database(doctor: Doctor) -> None:
    try:
        with _app_connection(doctor) as conn:
            where = f"{conn.info.host}:{conn.info.port}/{conn.info.dbname}"
            login = conn.info.user
            if login != settings.APP_ROLE and doctor.env != "dev":
                doctor.add(
                    "database",
                    Status.FAIL,
                    f"{where}: the app URL logs in as {login}, not {settings.APP_ROLE} "
                    "(MDAME_APP_DATABASE_URL)",
                )
                return
            if not _exists(conn, "mdame.schema_migrations"):
                doctor.add("database", Status.OK, f"{where} reachable as {login}")
                doctor.add("migrations", Status.FAIL, "not migrated: run `mdame db migrate`")
                doctor.add("roles", Status.SKIP, "not migrated")
                return
            recorded = None
            if _exists(conn, "mdame.environment"):
                row = conn.execute("SELECT env FROM mdame.environment").fetchone()
                recorded = row[0] if row else None
            if doctor.env and recorded and recorded != doctor.env:
                doctor.add(
                    "database",
                    Status.FAIL,
                    f"{where} belongs to ENV={recorded}; this shell has ENV={doctor.env}",
                )
            else:
                doctor.add(
                    "database",
                    Status.OK,
                    f"{where} reachable as {login}; ENV={recorded or 'not recorded'}",
                )
                doctor.db_ok = recorded is not None
            _check_migrations(doctor, conn)
            _check_roles(doctor, conn)
            if doctor.db_ok:
                _load_dimensions(doctor, conn)
    except (psycopg.Error, settings.SettingsError) as exc:
        doctor.add("database", Status.FAIL, f"cannot connect: {first_line(str(exc))}")
        doctor.add("migrations", Status.SKIP, "the database is not reachable")
        doctor.add("roles", Status.SKIP, "the database is not reachable")


def _check_migrations(doctor: Doctor, conn: psycopg.Connection) -> None:
    from mdame_core.migrate import MigrationError, function_files, migration_files, squashes

    try:
        # As the runner sees them: the versioned files, then the function files; the files a
        # baseline replaced may still be recorded by a database it has not migrated since.
        files = [(f.name, f.sha256) for f in (*migration_files(), *function_files())]
        squashed = {name: sha for squash in squashes() for name, sha in squash.replaced.items()}
    except MigrationError as exc:
        doctor.add("migrations", Status.FAIL, str(exc))
        return
    rows = conn.execute("SELECT filename, sha256 FROM mdame.schema_migrations").fetchall()
    problems = migration_problems(files, {name: sha for name, sha in rows}, squashed)
    if problems:
        doctor.add("migrations", Status.FAIL, "; ".join(problems))
        doctor.db_ok = False
    else:
        doctor.add("migrations", Status.OK, f"all {len(files)} applied, checksums match")


def _check_roles(doctor: Doctor, conn: psycopg.Connection) -> None:
    app = settings.APP_ROLE
    problems = []
    row = conn.execute(
        "SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = %s",
        (app,),
    ).fetchone()
    if row is None:
        doctor.add("roles", Status.FAIL, f"role {app} does not exist")
        return
    if row[0]:
        problems.append(f"{app} is a superuser")
    if row[1]:
        problems.append(f"{app} has BYPASSRLS")
    if row[2]:
        problems.append(f"{app} may create roles")
    owner = conn.execute(
        "SELECT pg_has_role(%s, %s, 'MEMBER')", (app, settings.OWNER_ROLE)
    ).fetchone()
    if owner and owner[0]:
        problems.append(f"{app} is a member of {settings.OWNER_ROLE}")
    writable = [
        f"{table} ({privilege})"
        for table, privilege in conn.execute(
            """SELECT c.relname, p.privilege
                 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                 CROSS JOIN unnest(ARRAY['INSERT','UPDATE','DELETE','TRUNCATE']) p(privilege)
                WHERE n.nspname = 'mdame' AND c.relkind IN ('r', 'p')
                  AND has_table_privilege(%s, c.oid, p.privilege)
                ORDER BY 1, 2""",
            (app,),
        )
    ]
    if writable:
        problems.append(f"{app} may write tables directly: {', '.join(writable)}")
    no_rls = [
        r[0]
        for r in conn.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'mdame' AND c.relkind IN ('r', 'p')
                  AND NOT (c.relrowsecurity AND EXISTS (
                      SELECT FROM pg_policies p
                       WHERE p.schemaname = 'mdame' AND p.tablename = c.relname
                         AND %s = ANY (p.roles)))
                ORDER BY 1""",
            (app,),
        )
    ]
    if no_rls:
        problems.append(f"row-level security off or no {app} policy: {', '.join(no_rls)}")
    if problems:
        doctor.add("roles", Status.FAIL, "; ".join(problems))
    else:
        doctor.add(
            "roles",
            Status.OK,
            f"{app}: not a superuser, no BYPASSRLS, reads only, RLS on every table",
        )


def _load_dimensions(doctor: Doctor, conn: psycopg.Connection) -> None:
    from mdame_core.state import Dimension
    from mdame_domain.dimensions import dimension_from_json

    rows = conn.execute(
        "SELECT id, slug, title, config, active FROM mdame.dimensions WHERE active ORDER BY slug"
    ).fetchall()
    doctor.dimension_rows = [Dimension(*row) for row in rows]
    for row in doctor.dimension_rows:
        with contextlib.suppress(Exception):  # a config of another version: defaults apply
            doctor.dimensions.append(dimension_from_json(row.config))


def _exists(conn: psycopg.Connection, relation: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (relation,)).fetchone()
    return bool(row and row[0])
