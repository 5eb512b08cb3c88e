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
)
from tests.adminkit import as_admin


def _expire_lock(owner, name: str) -> None:
    owner.execute(
        "UPDATE mdame.system_locks SET expires_at = now() - interval '1 second' "
        "WHERE lock_name = %s",
        (name,),
    )


def test_lock_is_exclusive_renewable_and_releasable(state) -> None:
    token = state.acquire_pipeline_lock("pipeline:tech", "run-1", 60)
    assert token is not None
    assert state.acquire_pipeline_lock("pipeline:tech", "run-2", 60) is None
    assert state.acquire_pipeline_lock("pipeline:tech", "run-1", 60) is None  # not re-entrant
    assert state.acquire_pipeline_lock("pipeline:news", "run-2", 60) > token  # other lock
    expires = state.heartbeat_pipeline_lock("pipeline:tech", "run-1", token, ttl_seconds=120)
    assert state.get_lock("pipeline:tech").expires_at == expires
    with pytest.raises(LeaseLost, match="last holder 'run-1'"):
        state.heartbeat_pipeline_lock("pipeline:tech", "run-2", token)
    assert state.release_pipeline_lock("pipeline:tech", "run-1", token) is True
    assert state.release_pipeline_lock("pipeline:tech", "run-1", token) is False  # a retry
    with pytest.raises(LeaseLost, match="released"):
        state.heartbeat_pipeline_lock("pipeline:tech", "run-1", token)
    successor = state.acquire_pipeline_lock("pipeline:tech", "run-2", 60)
    assert successor > token
    with pytest.raises(NotFound):
        state.heartbeat_pipeline_lock("never", "x", 1)


def test_expired_lock_is_taken_over_and_the_old_token_is_fenced(state, owner) -> None:
    old = state.acquire_pipeline_lock("pipeline:tech", "stale-run", 60)
    _expire_lock(owner, "pipeline:tech")
    new = state.acquire_pipeline_lock("pipeline:tech", "fresh-run", 60)
    assert new > old
    with pytest.raises(LeaseLost):
        state.heartbeat_pipeline_lock("pipeline:tech", "stale-run", old)
    with pytest.raises(LeaseLost):
        state.release_pipeline_lock("pipeline:tech", "stale-run", old)
    # The stale run cannot even record a run start under its old token.
    as_admin(state).upsert_dimension("tech", "Tech")
    with pytest.raises(LeaseLost, match="not a live lock token"):
        state.start_pipeline_run(uuid.uuid4(), "tech", "tech|2025-06-01", old)


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


def test_pipeline_run_start_and_finish(state) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    token = state.acquire_pipeline_lock("pipeline:tech", "run-1", 60)
    execution = uuid.uuid4()
    run = state.start_pipeline_run(execution, "tech", "tech|2025-06-01", token)
    assert state.start_pipeline_run(str(execution), "tech", "tech|2025-06-01", token) == run
    with pytest.raises(IdempotencyConflict):
        state.start_pipeline_run(execution, "tech", "tech|2025-06-02", token)
    assert state.finish_pipeline_run(execution, "succeeded", {"published": 1}) is True
    assert state.finish_pipeline_run(execution, "succeeded") is False
    with pytest.raises(StateConflict, match="already finished as succeeded"):
        state.finish_pipeline_run(execution, "failed")
    with pytest.raises(NotFound):
        state.finish_pipeline_run(uuid.uuid4(), "failed")
    # A run without a dimension or lock (e.g. a maintenance job) is allowed.
    assert state.start_pipeline_run(uuid.uuid4(), None, "maintenance", None) > run
