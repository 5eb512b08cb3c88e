"""The privilege model: the app role reads and calls functions, nothing else."""

from __future__ import annotations

import re
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.adminkit import as_admin
from tests.conftest import server_url, superuser


def _relations(owner: psycopg.Connection, kinds: str = "rp") -> list[str]:
    rows = owner.execute(
        """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'mdame' AND c.relkind = ANY (%s) ORDER BY 1""",
        (list(kinds),),
    ).fetchall()
    return [r[0] for r in rows]


def test_every_design_table_exists(owner) -> None:
    expected = {
        "dimensions",
        "dimension_accounts",
        "pipeline_runs",
        "system_locks",
        "trends",
        "topics",
        "scripts",
        "scenes",
        "jobs",
        "scene_cache",
        "voice_tracks",
        "renders",
        "reviews",
        "publications",
        "quota_ledger",
        "budget_ledger",
        "provider_attempts",
        "safety_audit_logs",
        "events",
        "environment",
        "work_kinds",
        "allowed_transitions",
        "schema_migrations",
    }
    assert expected <= set(_relations(owner, "r"))


def test_app_cannot_insert_update_delete_or_truncate_any_table(fresh_db, owner) -> None:
    relations = _relations(owner)
    assert len(relations) > 20
    with psycopg.connect(fresh_db.app, autocommit=True) as app:
        for rel in relations:
            table = sql.Identifier("mdame", rel)
            (column,) = owner.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = %s::regclass AND attnum = 1",
                (f"mdame.{rel}",),
            ).fetchone()
            statements = [
                sql.SQL("INSERT INTO {} DEFAULT VALUES").format(table),
                sql.SQL("UPDATE {} SET {} = {}").format(
                    table, sql.Identifier(column), sql.Identifier(column)
                ),
                sql.SQL("DELETE FROM {}").format(table),
                sql.SQL("TRUNCATE {}").format(table),
            ]
            for statement in statements:
                with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                    app.execute(statement)
            if rel not in ("upload_sessions", "alerts"):  # bearer columns (see below)
                app.execute(sql.SQL("SELECT * FROM {} LIMIT 1").format(table))  # reading is fine


def test_app_cannot_create_in_the_schema_or_use_sequences(fresh_db) -> None:
    with psycopg.connect(fresh_db.app, autocommit=True) as app:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("CREATE TABLE mdame.sneaky (x int)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("SELECT nextval('mdame.lock_tokens')")


ALLOW_LIST = Path(__file__).with_name("app_role_functions.txt")


# "signature  # fenced: what it checks" or "signature  # no fence: why it needs none".
ANNOTATED = re.compile(r"^(?P<signature>\S.*?\))  # (?P<kind>fenced|no fence): (?P<why>\S.*)$")


def _entries() -> list[str]:
    lines = ALLOW_LIST.read_text(encoding="utf-8").splitlines()
    return [line for line in lines if line.strip() and not line.startswith("#")]


def _allow_list() -> set[str]:
    return {line.split("  #")[0].strip() for line in _entries()}


def test_every_allowed_function_is_annotated_with_its_fence() -> None:
    """Each entry says what the database checks before it writes (a lock, a lease, a claim) or
    why it needs nothing; an entry that takes the lock token says which lock fences it."""
    bare = [line for line in _entries() if not ANNOTATED.match(line)]
    assert not bare, (
        f"{ALLOW_LIST.name}: entries without '  # fenced: ...' or '  # no fence: ...': {bare}"
    )
    for line in _entries():
        match = ANNOTATED.match(line)
        assert match is not None
        if "p_lock_token" in match["signature"]:
            assert match["kind"] == "fenced" and "lock" in match["why"], line


def test_an_entry_without_its_fence_fails_the_annotation_check() -> None:
    assert ANNOTATED.match("transition(p_kind text)  # fenced: the unit's dimension lock")
    assert ANNOTATED.match("collectable_media(p_policy jsonb)  # no fence: a read")
    for bare in (
        "transition(p_kind text)",
        "transition(p_kind text)  #",
        "transition(p_kind text)  # the unit's dimension lock",
        "transition(p_kind text)  # fenced:",
    ):
        assert not ANNOTATED.match(bare), bare


def _executable_by(owner, role: str) -> set[str]:
    return {
        r[0]
        for r in owner.execute(
            """SELECT p.proname || '(' || pg_get_function_identity_arguments(p.oid) || ')'
                 FROM pg_proc p WHERE p.pronamespace = 'mdame'::regnamespace
                  AND has_function_privilege(%s, p.oid, 'EXECUTE')""",
            [role],
        )
    }


def test_the_app_role_executes_exactly_the_reviewed_allow_list(owner) -> None:
    """A migration that grants the pipeline's role one more function (or a default privilege
    that does it silently) fails here until the allow-list is reviewed and changed with it."""
    app = _executable_by(owner, "mdame_app")
    allowed = _allow_list()
    extra, missing = sorted(app - allowed), sorted(allowed - app)
    assert not extra, f"mdame_app may execute functions not in {ALLOW_LIST.name}: {extra}"
    assert not missing, f"{ALLOW_LIST.name} lists functions mdame_app cannot execute: {missing}"


def test_money_quota_credential_registry_and_queue_rpcs_are_the_admins(fresh_db, owner) -> None:
    """The app role is refused each operator RPC by the database itself; the admin may run
    them, and the owner's URL acts as admin."""
    operator_rpcs = {
        "set_budget_cap(text, text, bigint)": ("tech", "2026-12", 1),
        "reserve_budget(text, text, bigint, text)": ("tech", "2026-12", 1, "k"),
        "settle_budget(text, bigint)": ("k", 1),
        "release_budget(text)": ("k",),
        "reserve_quota(bigint, integer, text)": (1, 1, "q"),
        "reserve_bucket_quota(bigint, text, integer, text)": (1, "units", 1, "q"),
        "take_call_slot(bigint, text, integer, integer)": (1, "init", 6, 60_000),
        "commit_quota(text)": ("q",),
        "release_quota(text)": ("q",),
        "put_scene_cache(text, text, text, integer, jsonb)": (
            "a" * 64,
            "file:///x.mp4",
            "b" * 64,
            60,
            "{}",
        ),
        "invalidate_scene_cache(text, text, text)": ("a" * 64, "file:///x.mp4", "why"),
        "enqueue_job(text, text, jsonb, integer, integer, integer, text)": (
            "t",
            "k",
            "{}",
            3,
            0,
            0,
            None,
        ),
        "store_account_credential(bigint, text, bytea, bytea)": (1, "k", b"x", b"y"),
        "rewrap_account_credentials(text, text, jsonb)": ("a", "b", "[]"),
        "upsert_dimension(text, text, jsonb, boolean)": ("tech", "Tech", "{}", True),
        "set_dimensions_active(text[])": (["tech"],),
        "register_dimension(text, text, jsonb, boolean, jsonb)": ("tech", "Tech", "{}", True, "[]"),
        "upsert_dimension_account(text, text, text, integer, boolean, text, integer)": (
            "tech",
            "youtube",
            "@t",
            1,
            True,
            "UTC",
            100,
        ),
        "set_dimension_accounts_active(text, jsonb)": ("tech", "[]"),
        "rollback_param_set(text, text)": ("tech", "why"),
        "rearm_paid_calls(text, date, text)": ("tech", None, "why"),
        "record_attempt(text, text, text, text, jsonb, bigint, integer)": (
            "w",
            "p",
            "h",
            "submitted",
            "{}",
            1,
            0,
        ),
        "finish_attempt(bigint, text, jsonb, bigint)": (1, "failed", "{}", 1),
        # A dead holder's lock or job, by what the app role reads: the liveness sweep's, as admin.
        "release_dead_pipeline_lock(text, text, bigint)": ("pipeline:tech", "run:stage", 1),
        "requeue_dead_job(bigint, text, integer, text)": (1, "host:1", 1, "gone"),
        "reconcile_attempt(bigint, text, jsonb, bigint, timestamptz)": (1, "failed", "{}", 1, None),
    }
    with psycopg.connect(fresh_db.app, autocommit=True) as app:
        for signature, args in operator_rpcs.items():
            name, types = signature.split("(")
            casts = ", ".join(f"%s::{t.strip()}" for t in types.rstrip(")").split(","))
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"):
                app.execute(f"SELECT mdame.{name}({casts})", args)
    admin = _executable_by(owner, "mdame_admin")
    for signature in operator_rpcs:
        name, types = signature.split("(")
        (identity,) = owner.execute(
            "SELECT pg_get_function_identity_arguments(%s::regprocedure)",
            [f"mdame.{signature}"],
        ).fetchone()
        assert f"{name}({identity})" in admin, signature


def test_only_resume_upload_hands_out_a_session_uri(fresh_db) -> None:
    """An upload session URI is a bearer: the app reads every other column of a session."""
    with psycopg.connect(fresh_db.app, autocommit=True) as app:
        app.execute(
            "SELECT attempt_id, publication_id, content_sha256, size_bytes, created_at "
            "FROM mdame.upload_sessions"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="upload_sessions"):
            app.execute("SELECT session_uri FROM mdame.upload_sessions")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("SELECT * FROM mdame.upload_sessions")


def test_only_the_claim_hands_out_an_alert_claim_token(fresh_db) -> None:
    """An alert's claim token settles its delivery: the app reads every other column."""
    with psycopg.connect(fresh_db.app, autocommit=True) as app:
        app.execute(
            "SELECT id, dimension_slug, cause, day, text, occurrences, attempts, last_error, "
            "claimed_until, delivered_at, created_at, last_seen_at FROM mdame.alerts"
        )
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match="alerts"):
            app.execute("SELECT claim_token FROM mdame.alerts")


def test_no_function_is_executable_by_public_and_rpcs_are_hardened(owner) -> None:
    rows = owner.execute(
        """SELECT p.proname, p.proacl IS NULL,
                  EXISTS (SELECT FROM aclexplode(p.proacl) a
                           WHERE a.grantee = 0 AND a.privilege_type = 'EXECUTE'),
                  has_function_privilege('mdame_app', p.oid, 'EXECUTE'),
                  p.prosecdef, p.proconfig, pg_get_userbyid(p.proowner)
             FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'mdame'"""
    ).fetchall()
    assert len(rows) > 40
    for name, default_acl, public, app, secdef, config, proowner in rows:
        assert not default_acl, f"{name}: default ACL means EXECUTE for PUBLIC"
        assert not public, f"{name} is executable by PUBLIC"
        assert proowner == "mdame_owner", name
        if name.startswith("_"):
            # Internal helpers and the unfenced bodies behind the fenced RPCs.
            assert not app, f"{name} is internal and must not be the app's to call"
        if not name.startswith("_") and name not in ("environment_is_immutable",):
            assert secdef or name == "dimension_lock_name", f"{name} must be SECURITY DEFINER"
        if secdef:
            assert config == ["search_path=mdame, pg_temp"], name


def test_default_privileges_cover_future_migrations(fresh_db, owner) -> None:
    """A later migration's functions and tables are the owner's until granted on purpose (a
    future RPC may move money, a future table may hold secrets), and never PUBLIC's."""
    owner.execute("CREATE TABLE mdame.later_secrets (id int, token text)")
    owner.execute("INSERT INTO mdame.later_secrets VALUES (1, 'hunter2')")
    owner.execute(
        "CREATE FUNCTION mdame.later_rpc() RETURNS int LANGUAGE sql SECURITY DEFINER "
        "SET search_path = mdame, pg_temp AS 'SELECT 1'"
    )
    with psycopg.connect(fresh_db.app, autocommit=True) as app:
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("SELECT * FROM mdame.later_secrets")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("SELECT mdame.later_rpc()")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            app.execute("INSERT INTO mdame.later_secrets VALUES (2, 'x')")
    owner.execute("GRANT EXECUTE ON FUNCTION mdame.later_rpc() TO mdame_app")  # on purpose
    with psycopg.connect(fresh_db.app, autocommit=True) as app:
        assert app.execute("SELECT mdame.later_rpc()").fetchone() == (1,)
    owner.execute("CREATE TABLE mdame.later_table (id int)")
    owner.execute("ALTER TABLE mdame.later_table ENABLE ROW LEVEL SECURITY")
    owner.execute(
        "CREATE POLICY app_reads ON mdame.later_table FOR SELECT TO mdame_app USING (true)"
    )
    owner.execute("INSERT INTO mdame.later_table VALUES (1)")
    owner.execute("GRANT SELECT ON mdame.later_table TO mdame_app")  # the explicit grant
    with psycopg.connect(fresh_db.app, autocommit=True) as app:
        assert app.execute("SELECT count(*) FROM mdame.later_table").fetchone() == (1,)
    (public,) = owner.execute(
        """SELECT EXISTS (SELECT FROM aclexplode(proacl) a WHERE a.grantee = 0)
             FROM pg_proc WHERE oid = 'mdame.later_rpc'::regproc"""
    ).fetchone()
    assert public is False


def test_environment_is_recorded_once_and_immutable(owner) -> None:
    assert owner.execute("SELECT env FROM mdame.environment").fetchall() == [("dev",)]
    with pytest.raises(psycopg.Error, match="recorded once"):
        owner.execute("UPDATE mdame.environment SET env = 'prod'")
    with pytest.raises(psycopg.Error, match="recorded once"):
        owner.execute("DELETE FROM mdame.environment")


def test_truncate_of_the_environment_is_refused_even_for_the_owner(owner) -> None:
    with pytest.raises(psycopg.Error, match="recorded once") as err:
        owner.execute("TRUNCATE mdame.environment")
    assert err.value.sqlstate == "MD001"
    assert owner.execute("SELECT env FROM mdame.environment").fetchall() == [("dev",)]


def test_row_security_hides_every_table_from_roles_but_ours(fresh_db, owner, state) -> None:
    """A role that is neither owner nor app (a hosted platform's API role, say) reads nothing,
    even when granted SELECT on everything; the app and the RPCs are unaffected."""
    as_admin(state).upsert_dimension("tech", "Tech")
    as_admin(state).set_budget_cap("tts", "2025-06", 10)
    as_admin(state).reserve_budget("tts", "2025-06", 1, "k")
    tables = _relations(owner, "rp")
    without = owner.execute(
        """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'mdame' AND c.relkind IN ('r', 'p')
              AND (NOT c.relrowsecurity OR c.relforcerowsecurity)"""
    ).fetchall()
    assert without == []  # enabled everywhere, and not forced (the owner's RPCs bypass it)
    policies = owner.execute(
        "SELECT DISTINCT roles::text[], cmd FROM pg_policies WHERE schemaname = 'mdame'"
    ).fetchall()
    assert sorted(policies) == [(["mdame_admin"], "SELECT"), (["mdame_app"], "SELECT")]
    intruder = f"mdame_intruder_{fresh_db.name}"
    with superuser() as su:
        su.execute(f'CREATE ROLE "{intruder}" NOLOGIN')
    try:
        with psycopg.connect(server_url("postgres", fresh_db.name), autocommit=True) as conn:
            conn.execute(f'GRANT USAGE ON SCHEMA mdame TO "{intruder}"')
            conn.execute(f'GRANT SELECT ON ALL TABLES IN SCHEMA mdame TO "{intruder}"')
            conn.execute(f'SET ROLE "{intruder}"')
            for table in [*tables, "budget_usage", "quota_usage"]:
                query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier("mdame", table))
                assert conn.execute(query).fetchone() == (0,), table
            conn.execute("RESET ROLE")
            conn.execute(f'REVOKE ALL ON ALL TABLES IN SCHEMA mdame FROM "{intruder}"')
            conn.execute(f'REVOKE ALL ON SCHEMA mdame FROM "{intruder}"')
    finally:
        with superuser() as su:
            su.execute(f'DROP ROLE "{intruder}"')
    assert [d.slug for d in state.list_dimensions()] == ["tech"]
    assert state.budget_usage("tts", "2025-06").reserved_micros == 1
    assert state.environment() == "dev"
