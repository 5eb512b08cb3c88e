"""Fenced writes: once the pipeline lock moved on, its old holder can change nothing.

Every RPC that changes a partition's work takes the holder's lock token; the database refuses
it (MD007, Fenced) when the token is not the live token of the work's dimension lock. On the
client side a Fence that is known lost refuses before anything is sent.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest
from psycopg.types.json import Jsonb

from mdame_core.state import (
    Fence,
    Fenced,
    FenceLost,
    IdempotencyConflict,
    LeaseLost,
    LockGrant,
    StateStore,
)
from tests.adminkit import as_admin

DAY = "2026-11-29"
SHA = "d" * 64
LATER = datetime(2999, 1, 1, tzinfo=UTC)  # a voice retry window that stays open (0022)
FEED = "https://example.com/feed.xml"
WEEK, NEXT_WEEK = "2026-11-23", "2026-11-30"  # Mondays


def hold(state: StateStore, slug: str, ttl: int = 600, holder: str = "test") -> StateStore:
    token = state.acquire_pipeline_lock(f"pipeline:{slug}", holder, ttl)
    assert token is not None, f"pipeline:{slug} is held"
    return state.fenced(Fence(f"pipeline:{slug}", holder, token, ttl))


def expire(owner: psycopg.Connection, slug: str) -> None:
    """The holder's lease runs out (as after a pause or a dropped heartbeat)."""
    owner.execute(
        "UPDATE mdame.system_locks SET expires_at = now() - interval '1 second' "
        "WHERE lock_name = %s",
        [f"pipeline:{slug}"],
    )


def _chain(a: StateStore) -> dict[str, Any]:
    """A dimension with a unit of every kind, written under `a`'s lock."""
    ids: dict[str, Any] = {}
    ids["dim"] = dim = as_admin(a).upsert_dimension("tech", "Tech", {"daily_budget_micros": 1_000})
    ids["account"] = as_admin(a).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    base = {"dimension_id": dim, "partition_date": DAY}
    [ids["trend"]] = a.record_trends(
        "tech", [{"key": "tr", "payload": {**base, "title": "AI chips"}}]
    )
    decision = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}
    ids["topic"] = a.decide_topic("to", {**base, "trend_id": ids["trend"]}, decision)
    ids["script"] = a.record_script("sc", {**base, "topic_id": ids["topic"]}, decision)
    ids["render"] = a.upsert_work_unit("render", "re", {"script_id": ids["script"]})
    ids["publication"] = a.upsert_work_unit(
        "publication",
        "pu",
        {
            "script_id": ids["script"],
            "render_id": ids["render"],
            "account_id": ids["account"],
            "content_sha256": SHA,
        },
    )
    ids["attempt"] = as_admin(a).record_attempt("pu", "outbox", "h", "submitted")
    ids["paid"] = a.begin_paid_call("tech", "paid", "gemini:m", "h", 10, 1_000, 3, 0).attempt_id
    a.reserve_bucket_quota(ids["account"], "units", 1, "listing")
    return ids


def _cases(ids: dict[str, Any], token: int) -> list[tuple[str, tuple[Any, ...]]]:
    """One call of every fenced RPC, with `token` as the lock token (valid input otherwise)."""
    base = {"dimension_id": ids["dim"], "partition_date": DAY}
    decision = Jsonb({"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"})
    pub = {"script_id": ids["script"], "render_id": ids["render"], "account_id": ids["account"]}
    return [
        ("upsert_work_unit", ("trend", "tr2", Jsonb({**base, "title": "x"}), token)),
        ("transition", ("script", ids["script"], "approved", "planned", Jsonb({}), token)),
        ("bump_work_attempt", ("script", ids["script"], Jsonb({}), token)),
        ("log_safety_decision", ("topic", "k", "tech", "allow", "r", Jsonb([]), "c", token)),
        ("record_review", (ids["render"], SHA, "technical", "approved", Jsonb({}), token)),
        ("reserve_bucket_quota", (ids["account"], "units", 1, "listing-2", token)),
        ("commit_quota", ("listing", token)),
        ("release_quota", ("listing", token)),
        ("invalidate_scene_cache", ("a" * 64, "file:///clip.mp4", "gone", token)),
        ("record_trends", ("tech", Jsonb([{"key": "tr3", "payload": base}]), token)),
        ("decide_topic", ("to2", Jsonb({**base, "trend_id": ids["trend"]}), decision, token)),
        ("record_script", ("sc2", Jsonb({**base, "topic_id": ids["topic"]}), decision, token)),
        ("plan_scenes", (ids["script"], Jsonb([]), "scene_clip", 3, "k", token)),
        ("finish_visuals", (ids["script"], token)),
        ("record_voice", (ids["script"], "vo", Jsonb({"script_id": ids["script"]}), token)),
        ("record_render", (ids["script"], "re2", Jsonb({"script_id": ids["script"]}), "t", token)),
        (
            "begin_upload",
            ("pu2", Jsonb({**pub, "content_sha256": SHA}), 1, "outbox", ["technical"], 0, token),
        ),
        ("finish_upload", (ids["attempt"], "failed", None, Jsonb({}), token)),
        ("reconcile_upload", (ids["publication"], None, "2026-11-29T00:00:00Z", token)),
        ("fail_script", (ids["script"], "approved", "why", token)),
        ("requeue_scenes", (ids["script"], Jsonb([]), "why", "scene_clip", 3, "k", token)),
        ("requeue_voice", (ids["script"], 1, "why", token)),
        ("requeue_render", (ids["script"], ids["render"], "why", token)),
        (
            "begin_bucket_upload",
            (
                "pu2",
                Jsonb({**pub, "content_sha256": SHA}),
                "insert",
                1,
                "youtube",
                ["technical"],
                0,
                token,
            ),
        ),
        ("open_upload_session", (ids["attempt"], "http://127.0.0.1/s", SHA, 10, token)),
        ("resume_upload", (ids["publication"], token)),
        ("upload_lease", (ids["attempt"], token)),
        ("settle_orphaned_paid_calls", ("tech", token)),
        ("record_upload_initiation", (ids["attempt"], True, None, token)),
        ("record_session_gone", (ids["attempt"], "2026-11-29T00:00:00Z", 300.0, token)),
        ("record_video_processing", (ids["publication"], "succeeded", Jsonb({}), token)),
        ("retire_publication", (ids["publication"], "why", token)),
        ("pause_account", (ids["account"], "quotaExceeded", token)),
        ("take_call_slot", (ids["account"], "init", 6, 60_000, token)),
        ("mark_needs_reauth", (ids["account"], "why", token)),
        (
            "replace_rotated_credential",
            (ids["account"], "0" * 16, b"w" * 60, b"c" * 40, b"e" * 40, token),
        ),
        ("halt_voice", (ids["script"], "why", False, 900, 3600, LATER, token)),
        ("retry_halted_voice", (ids["script"], token)),
        ("begin_paid_call", ("tech", "paid2", "gemini:m", "h", 10, 1_000, 3, 0, Jsonb({}), token)),
        ("settle_paid_call", (ids.get("paid", 1), "succeeded", 5, Jsonb({}), token)),
        ("release_paid_call", (ids.get("paid", 1), Jsonb({}), token)),
        ("mark_paid_call_unknown", (ids.get("paid", 1), Jsonb({}), token)),
        ("refuse_paid_call", (ids.get("paid", 1), "model", Jsonb({}), token)),
        # issue 11, slice "probe" (0014)
        (
            "record_bound_review",
            (ids["render"], SHA, "content", "approved", Jsonb({}), SHA, Jsonb({}), token),
        ),
        (
            "record_reviewed_render",
            (ids["script"], "re3", Jsonb({"script_id": ids["script"]}), Jsonb([]), token),
        ),
        ("record_thumbnail", (ids["publication"], "set", Jsonb({}), token)),
        *_newly_fenced(ids, token),
    ]


def _newly_fenced(ids: dict[str, Any], token: Any) -> list[tuple[str, tuple[Any, ...]]]:
    """The writes fenced by their own dimension's lock since the feed cache, the parameter
    sets, the analytics and the reports were found unfenced (valid input otherwise)."""
    stats = [{"publication_id": ids["publication"], "views": 1, "likes": 0, "comments": 0}]
    return [
        ("record_feed_fetch", (FEED, None, None, Jsonb([]), "tech", token)),
        (
            "apply_param_set",
            ("tech", WEEK, NEXT_WEEK, Jsonb({"hook_threshold": 0.71}), Jsonb([]), "why", token),
        ),
        ("record_video_stats", (DAY, Jsonb(stats), token)),
        ("store_report", ("tech", WEEK, Jsonb({}), "# week", Jsonb([]), token)),
        ("record_alert", ("tech", "halt", DAY, "voice failed", 120, token)),
    ]


def _fingerprint(owner: psycopg.Connection) -> list[tuple[Any, ...]]:
    tables = [
        r[0]
        for r in owner.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'mdame' AND c.relkind = 'r' AND c.relname <> 'system_locks'
                ORDER BY 1"""
        )
    ]
    return [
        (
            t,
            *owner.execute(
                f"SELECT count(*), md5(string_agg(x::text, '|' ORDER BY x::text)) FROM mdame.{t} x"
            ).fetchone(),
        )  # noqa: S608 - catalog names
        for t in tables
    ]


def test_a_stale_holder_is_refused_on_every_write_rpc_after_a_takeover(state, owner) -> None:
    a = hold(state, "tech", holder="run-a")
    ids = _chain(a)
    old_token, old_secret = a.fence.token, a.fence.secret
    expire(owner, "tech")
    b = hold(state, "tech", holder="run-b")  # the takeover
    assert b.fence.token > old_token

    before = _fingerprint(owner)
    for rpc, args in _cases(ids, old_secret):
        with pytest.raises(Fenced) as err:
            state.call(rpc, *args)  # the unfenced client: only the database refuses
        assert err.value.sqlstate == "MD007", rpc
        assert "fenced" in err.value.message, rpc
    assert _fingerprint(owner) == before
    with pytest.raises(LeaseLost):  # a run record cannot start under the old token either
        state.start_pipeline_run(uuid.uuid4(), "tech", f"{DAY}|tech", old_secret)


def test_every_rpc_that_takes_a_lock_token_is_covered(owner) -> None:
    fenced = {
        r[0]
        for r in owner.execute(
            """SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
                WHERE n.nspname = 'mdame' AND p.prosecdef AND 'p_lock_token' = ANY(p.proargnames)
                  AND has_function_privilege('mdame_app', p.oid, 'EXECUTE')
                  AND p.proname <> 'start_pipeline_run'"""
        )
    }
    assert fenced == {
        rpc
        for rpc, _ in _cases(
            dict.fromkeys(
                ("dim", "script", "render", "account", "trend", "topic", "attempt", "publication"),
                1,
            ),
            1,
        )
    }


def test_the_token_of_another_dimension_is_refused(state) -> None:
    setup = hold(state, "tech")
    as_admin(setup).upsert_dimension("news", "News")
    ids = _chain(setup)
    news = hold(state, "news")
    with pytest.raises(Fenced, match="pipeline:tech"):
        state.call(
            "transition",
            "script",
            ids["script"],
            "approved",
            "planned",
            Jsonb({}),
            news.fence.secret,
        )
    with pytest.raises(Fenced):  # no token at all
        state.call("transition", "script", ids["script"], "approved", "planned", Jsonb({}), None)


def test_the_newly_fenced_writes_refuse_another_dimensions_token(state, owner) -> None:
    """A live lock of another dimension writes none of tech's feed cache, parameters,
    counters, report or alerts, and a paid call of news cannot see tech's attempts."""
    setup = hold(state, "tech")
    as_admin(setup).upsert_dimension("news", "News")
    ids = _chain(setup)
    news = hold(state, "news")
    before = _fingerprint(owner)
    for rpc, args in _newly_fenced(ids, news._token()):  # what its fenced calls carry
        with pytest.raises(Fenced, match="pipeline:tech") as err:
            state.call(rpc, *args)
        assert err.value.sqlstate == "MD007", rpc
    with pytest.raises(Fenced, match="needs its pipeline lock token"):  # no token at all
        state.call("record_alert", "tech", "halt", DAY, "voice failed", 120, None)
    # tech's work key, named by news under news's own lock: refused, nothing of tech's seen.
    with pytest.raises(IdempotencyConflict, match="not dimension news's paid calls"):
        news.begin_paid_call("news", "paid", "gemini:m", "h", 10, None, 3, 0)
    assert _fingerprint(owner) == before


def test_a_fence_known_lost_refuses_before_sending_anything(state, owner) -> None:
    a = hold(state, "tech")
    ids = _chain(a)
    events = owner.execute("SELECT count(*) FROM mdame.events").fetchone()
    a.fence.lose("renewal refused")
    with pytest.raises(FenceLost, match="renewal refused"):
        a.transition("script", ids["script"], "approved", "planned")
    with pytest.raises(FenceLost):
        a.get_work_unit("script", ids["script"])  # no further call of any kind
    assert owner.execute("SELECT count(*) FROM mdame.events").fetchone() == events


def test_a_fence_not_renewed_within_its_lease_is_lost(state) -> None:
    a = hold(state, "tech", ttl=1)
    fence = Fence(a.fence.lock_name, a.fence.holder, LockGrant(a.fence.token, a.fence.secret), 0.05)
    view = state.fenced(fence)
    import time

    time.sleep(0.1)
    with pytest.raises(FenceLost, match="not renewed"):
        view.list_dimensions()


def test_writes_without_a_fence_are_a_programming_error(state) -> None:
    with pytest.raises(RuntimeError, match="needs the pipeline lock"):
        state.transition("script", 1, "approved", "planned")
