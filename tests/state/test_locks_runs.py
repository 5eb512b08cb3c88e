"""Pipeline locks (fencing tokens), dimensions, accounts and pipeline runs."""

from __future__ import annotations

import uuid

import pytest

from mdame_core.state import (
    IdempotencyConflict,
    InvalidInput,
    LeaseLost,
    NotFound,
    StateConflict,
    StateError,
)
from tests.adminkit import as_admin


def _expire_lock(owner, name: str) -> None:
    owner.execute(
        "UPDATE mdame.system_locks SET expires_at = now() - interval '1 second' "
        "WHERE lock_name = %s",
        (name,),
    )


def test_lock_is_exclusive_renewable_and_releasable(state) -> None:
    grant = state.acquire_pipeline_lock("pipeline:tech", "run-1", 60)
    assert grant is not None
    secret = grant.secret
    assert state.acquire_pipeline_lock("pipeline:tech", "run-2", 60) is None
    assert state.acquire_pipeline_lock("pipeline:tech", "run-1", 60) is None  # not re-entrant
    other = state.acquire_pipeline_lock("pipeline:news", "run-2", 60)
    assert other is not None and other.token > grant.token  # other lock
    expires = state.heartbeat_pipeline_lock("pipeline:tech", "run-1", secret, ttl_seconds=120)
    assert state.get_lock("pipeline:tech").expires_at == expires
    with pytest.raises(LeaseLost, match="last holder 'run-1'"):
        state.heartbeat_pipeline_lock("pipeline:tech", "run-2", secret)
    assert state.release_pipeline_lock("pipeline:tech", "run-1", secret) is True
    assert state.release_pipeline_lock("pipeline:tech", "run-1", secret) is False  # a retry
    with pytest.raises(LeaseLost, match="released"):
        state.heartbeat_pipeline_lock("pipeline:tech", "run-1", secret)
    successor = state.acquire_pipeline_lock("pipeline:tech", "run-2", 60)
    assert successor is not None and successor.token > grant.token
    with pytest.raises(NotFound):
        state.heartbeat_pipeline_lock("never", "x", 1)


def test_a_lock_is_held_by_its_secret_not_by_its_public_token(state, owner) -> None:
    """The token is the public fence number (the app role reads it); the secret is handed out
    once, kept only as its SHA-256, and named nowhere: not in the lock row, nor in events, nor
    in an error message."""
    grant = state.acquire_pipeline_lock("pipeline:tech", "run-1", 60)
    assert grant is not None and grant.secret != grant.token
    assert str(grant.secret) not in repr(grant)
    lock = state.get_lock("pipeline:tech")
    assert lock.token == grant.token
    with pytest.raises(LeaseLost) as err:  # the public token alone holds nothing
        state.heartbeat_pipeline_lock("pipeline:tech", "run-1", grant.token)
    assert str(grant.token) in str(err.value)  # errors name the public token ...
    with pytest.raises(LeaseLost):
        state.release_pipeline_lock("pipeline:tech", "run-1", grant.token)
    assert state.heartbeat_pipeline_lock("pipeline:tech", "run-1", grant.secret)
    row = owner.execute(
        "SELECT to_jsonb(l)::text, secret_sha256 = sha256(int8send(%s)) FROM mdame.system_locks l",
        [grant.secret],
    ).fetchone()
    assert row is not None and row[1] is True
    assert str(grant.secret) not in row[0]  # ... and nothing stores the secret itself
    events = owner.execute("SELECT string_agg(detail::text || subject_id, ' ') FROM mdame.events")
    assert str(grant.secret) not in (events.fetchone() or ("",))[0]
    # A lock taken before locks had secrets is taken over as expired.
    owner.execute("UPDATE mdame.system_locks SET secret_sha256 = NULL")
    taken = state.acquire_pipeline_lock("pipeline:tech", "run-2", 60)
    assert taken is not None and taken.token > grant.token
    with pytest.raises(LeaseLost):
        state.heartbeat_pipeline_lock("pipeline:tech", "run-1", grant.secret)


def test_expired_lock_is_taken_over_and_the_old_token_is_fenced(state, owner) -> None:
    old = state.acquire_pipeline_lock("pipeline:tech", "stale-run", 60)
    assert old is not None
    _expire_lock(owner, "pipeline:tech")
    new = state.acquire_pipeline_lock("pipeline:tech", "fresh-run", 60)
    assert new is not None and new.token > old.token
    with pytest.raises(LeaseLost):
        state.heartbeat_pipeline_lock("pipeline:tech", "stale-run", old.secret)
    with pytest.raises(LeaseLost):
        state.release_pipeline_lock("pipeline:tech", "stale-run", old.secret)
    # The stale run cannot even record a run start under its old token.
    as_admin(state).upsert_dimension("tech", "Tech")
    with pytest.raises(LeaseLost, match="not a live lock token"):
        state.start_pipeline_run(uuid.uuid4(), "tech", "tech|2025-06-01", old.secret)


def test_the_operator_releases_a_dead_holders_lock_by_its_public_token(state) -> None:
    """The liveness sweep's release (a run known ended): the admin role's, by token and holder,
    so a later holding of the same lock is never released by it; the app role may not."""
    grant = state.acquire_pipeline_lock("pipeline:tech", "run-1:stage", 60)
    assert grant is not None
    with pytest.raises(StateError, match="permission denied"):
        state.release_dead_pipeline_lock("pipeline:tech", "run-1:stage", grant.token)
    admin = as_admin(state)
    assert not admin.release_dead_pipeline_lock("pipeline:tech", "run-2:stage", grant.token)
    assert not admin.release_dead_pipeline_lock("pipeline:tech", "run-1:stage", grant.token - 1)
    assert admin.release_dead_pipeline_lock("pipeline:tech", "run-1:stage", grant.token)
    assert state.get_lock("pipeline:tech").released
    assert not admin.release_dead_pipeline_lock("pipeline:tech", "run-1:stage", grant.token)
    later = state.acquire_pipeline_lock("pipeline:tech", "run-1:stage", 60)
    assert later is not None
    assert not admin.release_dead_pipeline_lock("pipeline:tech", "run-1:stage", grant.token)
    assert not state.get_lock("pipeline:tech").released


def test_dimensions_upsert_and_active_set(state) -> None:
    tech = as_admin(state).upsert_dimension("tech", "Tech", {"voice": "en-US"})
    assert as_admin(state).upsert_dimension("tech", "Tech", {"voice": "en-US"}) == tech
    assert as_admin(state).upsert_dimension("tech", "Technology", {"voice": "en-GB"}) == tech
    as_admin(state).upsert_dimension("news", "News")
    as_admin(state).upsert_dimension("pets", "Pets", active=False)
    assert state.get_dimension("tech").config == {"voice": "en-GB"}

    assert as_admin(state).set_dimensions_active(["tech", "pets"]) == 2  # news off, pets on
    assert [d.slug for d in state.list_dimensions(active_only=True)] == ["pets", "tech"]
    assert as_admin(state).set_dimensions_active(["tech", "pets"]) == 0
    with pytest.raises(NotFound, match="unknown dimension"):
        as_admin(state).set_dimensions_active(["tech", "typo"])
    assert [d.slug for d in state.list_dimensions(active_only=True)] == ["pets", "tech"]
    with pytest.raises(InvalidInput, match="slug"):
        as_admin(state).upsert_dimension("Bad Slug", "x")


def test_accounts_belong_to_one_dimension(state) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    as_admin(state).upsert_dimension("news", "News")
    account = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    assert as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 5_000) == account
    assert state.list_accounts("tech")[0].daily_quota_units == 5_000
    with pytest.raises(IdempotencyConflict, match="another dimension"):
        as_admin(state).upsert_dimension_account("news", "youtube", "@tech", 10_000)
    with pytest.raises(InvalidInput):
        as_admin(state).upsert_dimension_account("tech", "youtube", "@neg", -1)
    with pytest.raises(NotFound):
        as_admin(state).upsert_dimension_account("nope", "youtube", "@x", 1)


def test_a_success_cannot_hide_a_failure(state, owner) -> None:
    """finish_pipeline_run holds no lock (the run has ended): a success recorded first, by a
    mistaken or forged call, gives way to the failure the run's end reports; a failure is
    never turned into a success."""
    as_admin(state).upsert_dimension("tech", "Tech")
    forged, failed = uuid.uuid4(), uuid.uuid4()
    for execution in (forged, failed):
        state.start_pipeline_run(execution, "tech", "2025-06-01|tech", None)
    assert state.finish_pipeline_run(forged, "succeeded", {"job": "publishing_job"}) is True
    assert state.finish_pipeline_run(forged, "failed", {"dagster_status": "FAILURE"}) is True
    assert state.finish_pipeline_run(forged, "failed") is False
    with pytest.raises(StateConflict, match="already finished as failed"):
        state.finish_pipeline_run(forged, "succeeded")
    assert state.finish_pipeline_run(failed, "cancelled") is True
    with pytest.raises(StateConflict, match="already finished as cancelled"):
        state.finish_pipeline_run(failed, "succeeded")
    rows = owner.execute(
        "SELECT execution_id, status FROM mdame.pipeline_runs ORDER BY id"
    ).fetchall()
    assert rows == [(forged, "failed"), (failed, "cancelled")]
    (replaced,) = owner.execute(
        """SELECT from_state, to_state FROM mdame.events WHERE subject_kind = 'pipeline_run'
              AND event = 'finished' AND from_state = 'succeeded'"""
    ).fetchall()
    assert replaced == ("succeeded", "failed")


def test_pipeline_run_start_and_finish(state) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    grant = state.acquire_pipeline_lock("pipeline:tech", "run-1", 60)
    assert grant is not None
    token = grant.secret
    execution = uuid.uuid4()
    run = state.start_pipeline_run(execution, "tech", "tech|2025-06-01", token)
    recorded = state._select("SELECT lock_token FROM mdame.pipeline_runs WHERE id = %s", [run])
    assert recorded == [(grant.token,)]  # the run records the public token, not the secret
    assert state.start_pipeline_run(str(execution), "tech", "tech|2025-06-01", token) == run
    with pytest.raises(IdempotencyConflict):
        state.start_pipeline_run(execution, "tech", "tech|2025-06-02", token)
    assert state.finish_pipeline_run(execution, "succeeded", {"published": 1}) is True
    assert state.finish_pipeline_run(execution, "succeeded") is False
    with pytest.raises(NotFound):
        state.finish_pipeline_run(uuid.uuid4(), "failed")
    # A run without a dimension or lock (e.g. a maintenance job) is allowed.
    assert state.start_pipeline_run(uuid.uuid4(), None, "maintenance", None) > run
