"""The environment guard, the client's role handling and error mapping, the Dagster resource."""

from __future__ import annotations

import threading
import time

import psycopg
import pytest
from test_fencing import hold

from mdame_core import settings
from mdame_core.migrate import migrate
from mdame_core.settings import SettingsError
from mdame_core.state import (
    EnvironmentMismatch,
    InvalidInput,
    StateError,
    StateStore,
    set_commit_observer,
)
from mdame_resources.state import StateStoreResource, close_clients
from tests.adminkit import as_admin


def test_other_env_is_refused(fresh_db) -> None:
    with pytest.raises(EnvironmentMismatch, match="ENV=dev, this process runs with ENV=prod"):
        StateStore(fresh_db.app, env="prod")


def test_unset_env_is_refused(fresh_db, monkeypatch) -> None:
    monkeypatch.delenv("ENV", raising=False)
    with pytest.raises(SettingsError, match="ENV must be set"):
        StateStore(fresh_db.app)
    monkeypatch.setenv("ENV", "prod")
    with pytest.raises(EnvironmentMismatch):
        StateStore(fresh_db.app)


def test_unmigrated_database_is_refused(empty_db) -> None:
    with pytest.raises(EnvironmentMismatch, match="migrate"):
        StateStore(empty_db.owner, env="dev")


def test_owner_url_drops_to_the_app_role(fresh_db) -> None:
    with StateStore(fresh_db.owner, env="dev") as store:
        assert store._select("SELECT current_user, session_user") == [("mdame_app", "mdame_owner")]
        as_admin(store).upsert_dimension("tech", "Tech")  # RPCs work through SET ROLE
        with store._pool.connection() as conn, pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("DELETE FROM mdame.dimensions")  # the pooled session cannot write
        with pytest.raises(StateError, match="does not exist") as err:
            store.call("no_such_rpc")
        assert err.value.sqlstate == "42883"


def test_errors_keep_rpc_and_sqlstate_and_leave_the_connection_usable(state) -> None:
    with pytest.raises(InvalidInput) as err:
        as_admin(state).upsert_dimension("Not A Slug", "x")
    assert err.value.rpc == "upsert_dimension"
    assert err.value.sqlstate == "MD001"
    assert err.value.message.startswith("mdame: ")
    for _ in range(8):  # more failures than pool connections: none is left in a transaction
        with pytest.raises(StateError):
            as_admin(state).enqueue_job("scene", None, {})
    assert as_admin(state).enqueue_job("scene", "ok", {}) > 0
    with pytest.raises(ValueError):
        state.call("drop table x; --")


def test_call_is_one_autocommit_statement_between_the_observer_points(state) -> None:
    seen: list[tuple[str, str, int]] = []

    def observe(rpc: str, phase: str) -> None:
        with state._pool.connection() as other:  # another session: committed rows only
            (n,) = other.execute("SELECT count(*) FROM mdame.dimensions").fetchone()
        seen.append((phase, rpc, n))

    set_commit_observer(observe)
    try:
        as_admin(state).upsert_dimension("tech", "Tech")
        with pytest.raises(InvalidInput):
            as_admin(state).upsert_dimension("NOT A SLUG", "refused")
    finally:
        set_commit_observer(None)
    assert seen == [
        ("before", "upsert_dimension", 0),
        ("after", "upsert_dimension", 1),
        ("before", "upsert_dimension", 1),  # refused: no "after", nothing committed
    ]


def test_resource_caches_one_client_per_process(fresh_db) -> None:
    resource = StateStoreResource(database_url=fresh_db.app, pool_max=2)
    try:
        client = resource.get_client()
        assert client is resource.get_client()
        assert client.environment() == "dev"
        assert StateStoreResource(database_url=fresh_db.app, pool_max=2).get_client() is client
    finally:
        close_clients()


def test_stale_pooled_connection_is_replaced_transparently(fresh_db, state) -> None:
    """An idle connection killed by the server is found by the pool's check on checkout, before
    anything is sent on it: the call runs on a fresh connection."""
    with state._pool.connection() as conn:
        pid = conn.info.backend_pid
    with psycopg.connect(fresh_db.owner, autocommit=True) as owner:
        # Wait until the backend has exited: its FATAL message is then on the client's socket
        # (without the wait, a loaded machine could check out the connection before it is).
        owner.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,))
    for slug in ("tech", "science", "cooking"):  # every pooled connection is checked out once
        assert as_admin(state).upsert_dimension(slug, slug.title()) > 0


def test_connection_lost_mid_call_is_not_disguised_as_a_refusal(fresh_db, state) -> None:
    """Lost while the RPC runs: OperationalError propagates (the outcome is for the caller to
    re-read), it is not turned into a StateError that would claim nothing happened."""
    with psycopg.connect(fresh_db.owner) as blocker:
        # An uncommitted insert of the same slug: the call waits on it inside the statement.
        blocker.execute("SELECT mdame.upsert_dimension('tech', 'Tech', '{}', true)")

        def kill_the_waiting_call() -> None:
            with psycopg.connect(fresh_db.owner, autocommit=True) as killer:
                for _ in range(200):
                    killed = killer.execute(
                        """SELECT pg_terminate_backend(pid) FROM pg_stat_activity
                            WHERE wait_event_type = 'Lock' AND datname = current_database()"""
                    ).fetchall()
                    if killed:
                        return
                    time.sleep(0.05)

        thread = threading.Thread(target=kill_the_waiting_call)
        thread.start()
        with pytest.raises(psycopg.OperationalError):
            as_admin(state).upsert_dimension("tech", "Tech")
        thread.join()
        blocker.rollback()
    assert state.get_dimension("tech") is None  # killed before it committed: rolled back
    assert as_admin(state).upsert_dimension("tech", "Tech") > 0


def test_external_database_outside_dev_requires_the_app_url(monkeypatch) -> None:
    owner_url = "postgresql://postgres:pw@db.example.invalid:5432/postgres"
    app_url = "postgresql://mdame_app:pw@db.example.invalid:5432/postgres"
    monkeypatch.setenv("MDAME_DATABASE_URL", owner_url)
    monkeypatch.delenv("MDAME_APP_DATABASE_URL", raising=False)
    monkeypatch.setenv("ENV", "prod")
    with pytest.raises(SettingsError, match="MDAME_APP_DATABASE_URL is required"):
        settings.database_url("app")
    assert settings.database_url("owner") == owner_url  # migrations still run as the owner
    monkeypatch.setenv("ENV", "dev")
    assert settings.database_url("app") == owner_url  # dev keeps the SET ROLE convenience
    monkeypatch.setenv("ENV", "prod")
    monkeypatch.setenv("MDAME_APP_DATABASE_URL", app_url)
    assert settings.database_url("app") == app_url


def test_prod_client_refuses_any_login_but_the_app_role(empty_db) -> None:
    migrate(empty_db.owner, "prod")
    with pytest.raises(SettingsError, match="must log in as mdame_app"):
        StateStore(empty_db.owner, env="prod")
    with StateStore(empty_db.app, env="prod") as store:
        assert store._select("SELECT current_user, session_user") == [("mdame_app", "mdame_app")]
        assert store.environment() == "prod"


@pytest.mark.parametrize(
    ("rpc_call", "expected"),
    [
        (
            lambda s: s.upsert_work_unit("topic", "t-1", {"title": "a\x00b"}),
            "upsert_work_unit: p_payload contains a NUL character at $.title",
        ),
        (
            lambda s: s.upsert_work_unit("topic", "t\x00-1", {"title": "ok"}),
            "upsert_work_unit: p_idempotency_key contains a NUL character",
        ),
        (
            lambda s: as_admin(s).enqueue_job(
                "scene", "j-1", {"scenes": [{"n": 1}, {"text": "\x00"}]}
            ),
            "enqueue_job: p_payload contains a NUL character at $.scenes[1].text",
        ),
        (
            lambda s: as_admin(s).enqueue_job("scene", "j-1", {"a": {"b\x00": 1}}),
            "enqueue_job: p_payload contains a NUL character at $.a (a key)",
        ),
        (
            lambda s: as_admin(s).upsert_dimension("tech", "Te\x00ch"),
            "upsert_dimension: p_title contains a NUL character",
        ),
        (
            lambda s: as_admin(s).set_dimensions_active(["tech", "x\x00"]),
            "set_dimensions_active: p_active_slugs contains a NUL character at $[1]",
        ),
    ],
)
def test_a_nul_character_is_refused_naming_the_parameter(state, owner, rpc_call, expected) -> None:
    held = hold(state, "tech")  # work-unit writes are fenced
    sent: list[str] = []
    set_commit_observer(lambda rpc, phase: sent.append(rpc))
    try:
        with pytest.raises(InvalidInput) as err:
            rpc_call(held)
    finally:
        set_commit_observer(None)
    assert str(err.value) == expected
    assert err.value.sqlstate == "MD001"
    assert sent == []  # refused before anything was sent
    for table in ("topics", "jobs", "dimensions"):
        assert owner.execute(f"SELECT count(*) FROM mdame.{table}").fetchone() == (0,)
    assert as_admin(state).upsert_dimension("tech", "Tech") > 0  # the client is still fine
