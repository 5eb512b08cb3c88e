"""Bad input to every RPC raises a clear 'mdame: ...' error and changes nothing."""

from __future__ import annotations

import uuid
from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from mdame_core.state import (
    Fence,
    IdempotencyConflict,
    InvalidInput,
    LeaseLost,
    NotFound,
    ReconcileRequired,
    StateConflict,
    StateError,
    StateStore,
)
from mdame_domain.adaptive import AdaptiveLimits
from tests.adminkit import as_admin

SHA = "c" * 64
BIG = Jsonb({"blob": "x" * 262_144})  # just over the documented 256 KiB limit
E = Jsonb({})
SOON = datetime.now(UTC) + timedelta(hours=1)
FAR_FUTURE = datetime.now(UTC) + timedelta(days=30)  # a scene waits 8 days at most
# tech's registered config: the Adaptive Engine's default limits (apply_param_set reads them).
TECH_CONFIG = {"adaptive": asdict(AdaptiveLimits())}
RETAIN = Jsonb({"render_days": 30, "voice_days": 7})  # 0018's retention policy
CLIP_URI = "media://sha256/" + "a" * 64 + ".mp4"
LATER = datetime(2999, 1, 1, tzinfo=UTC)  # a voice retry window that stays open (0022)
STALE = uuid.UUID(int=1)  # an alert claim token that never was the current one (0023)


# tech's account as register_dimension takes it.
ACCOUNT = {
    "platform": "youtube",
    "handle": "@tech",
    "daily_quota_units": 100,
    "quota_timezone": "UTC",
    "daily_posts": 5,
    "active": True,
}


def _populate(state: StateStore) -> dict[str, Any]:
    """Rows in every table, so 'changes nothing' means something."""
    ids: dict[str, Any] = {}
    ids["dim"] = dim = as_admin(state).upsert_dimension("tech", "Tech", TECH_CONFIG)
    as_admin(state).upsert_dimension("news", "News")
    ids["account"] = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 100)
    grant = state.acquire_pipeline_lock("pipeline:tech", "run-1", 600)
    assert grant is not None
    ids["token"] = grant.secret  # what every fenced RPC's lock token argument carries
    w = state.fenced(Fence("pipeline:tech", "run-1", grant, 600))  # work writes
    base = {"dimension_id": dim, "partition_date": "2025-06-01"}
    ids["topic_payload"] = base
    ids["topic"] = w.upsert_work_unit("topic", "topic-1", base)
    ids["script"] = script = w.upsert_work_unit(
        "script", "script-1", {**base, "topic_id": ids["topic"]}
    )
    ids["render"] = w.upsert_work_unit("render", "render-1", {"script_id": script})
    ids["execution"] = uuid.uuid4()
    state.start_pipeline_run(ids["execution"], "tech", "tech|2025-06-01", ids["token"])
    ids["job"] = as_admin(state).enqueue_job("scene", "job-1", {"n": 1})
    claimed = state.claim_job("scene", "w", 600)
    assert claimed is not None
    ids["lease"] = claimed.lease_secret
    as_admin(state).set_budget_cap("tts", "2025-06", 1_000)
    as_admin(state).reserve_budget("tts", "2025-06", 10, "budget-open")
    as_admin(state).reserve_budget("tts", "2025-06", 10, "budget-settled")
    as_admin(state).settle_budget("budget-settled", 9)
    as_admin(state).reserve_quota(ids["account"], 10, "quota-open")
    as_admin(state).reserve_quota(ids["account"], 10, "quota-committed")
    as_admin(state).commit_quota("quota-committed")
    as_admin(state).store_account_credential(ids["account"], "0" * 16, b"w" * 60, b"c" * 40)
    ids["attempt_unknown"] = as_admin(w).record_attempt("blocked", "gemini", "h1", "unknown")
    ids["attempt_done"] = as_admin(w).record_attempt("done", "gemini", "h1", "succeeded")
    w.record_review(ids["render"], SHA, "technical", "approved")
    as_admin(state).put_scene_cache("scene-hash", "media://a", SHA, 600)
    # Slice "adaptive" (0017): a parameter set, so its table is covered by 'changes nothing'.
    state.call(
        "apply_param_set",
        "tech",
        "2025-06-02",
        "2025-06-09",
        Jsonb({"videos_per_day": 1}),
        Jsonb([]),
        "seed",
        ids["token"],
    )
    w.log_safety_decision("topic", "topic-1", "tech", "allow", "default", [], "rules")
    w.record_feed_fetch("tech", "https://example.com/feed.xml", '"e1"', None, [])  # 0010, feeds
    # 0015 (alerts): one delivered alert, and (0023) one its raiser still holds.
    delivered = w.record_alert("tech", "halt", date(2025, 6, 1), "t")
    assert delivered.claim_token is not None
    ids["alert"] = delivered.alert_id
    state.mark_alert_delivered(ids["alert"], delivered.claim_token)
    held = w.record_alert("tech", "disk_low", date(2025, 6, 1), "t")
    ids["held_alert"], ids["held_claim"] = held.alert_id, held.claim_token
    w.store_report("tech", date(2026, 11, 23), {}, "# week", [])  # 0016, auditor
    return ids


def _cases(ids: dict[str, Any]) -> list[tuple[str, tuple[Any, ...], type[StateError]]]:
    job, render, topic, token = ids["job"], ids["render"], ids["topic"], ids["token"]
    lease = ids["lease"]
    execution, account = ids["execution"], ids["account"]
    unknown, done = ids["attempt_unknown"], ids["attempt_done"]
    other = {"dimension_id": ids["dim"], "partition_date": "2025-06-02"}
    script = ids["script"]
    pub = {"script_id": script, "render_id": render, "account_id": account}
    held, claim = ids["held_alert"], ids["held_claim"]
    return [
        ("acquire_pipeline_lock", (None, "h", 10), InvalidInput),
        ("acquire_pipeline_lock", ("l", "", 10), InvalidInput),
        ("acquire_pipeline_lock", ("l", "h", 0), InvalidInput),
        ("acquire_pipeline_lock", ("l", "h", None), InvalidInput),
        ("heartbeat_pipeline_lock", ("pipeline:tech", "run-1", None, None), InvalidInput),
        ("heartbeat_pipeline_lock", ("pipeline:tech", "run-1", token, -5), InvalidInput),
        ("heartbeat_pipeline_lock", ("pipeline:tech", "intruder", token, None), LeaseLost),
        ("heartbeat_pipeline_lock", ("pipeline:tech", "run-1", token - 1, None), LeaseLost),
        ("release_pipeline_lock", (None, "run-1", token), InvalidInput),
        ("release_pipeline_lock", ("pipeline:tech", "intruder", token), LeaseLost),
        ("release_dead_pipeline_lock", (None, "run-1", 1), InvalidInput),
        ("release_dead_pipeline_lock", ("pipeline:tech", "", 1), InvalidInput),
        ("release_dead_pipeline_lock", ("pipeline:tech", "run-1", None), InvalidInput),
        ("upsert_dimension", ("Bad Slug", "x", E, True), InvalidInput),
        ("upsert_dimension", (None, "x", E, True), InvalidInput),
        ("upsert_dimension", ("ok", "", E, True), InvalidInput),
        ("upsert_dimension", ("ok", "x", None, True), InvalidInput),
        ("upsert_dimension", ("ok", "x", Jsonb([1]), True), InvalidInput),
        ("upsert_dimension", ("ok", "x", BIG, True), InvalidInput),
        ("upsert_dimension", ("ok", "x", E, None), InvalidInput),
        ("set_dimensions_active", (None,), InvalidInput),
        ("set_dimensions_active", (["tech", None],), InvalidInput),
        ("set_dimensions_active", (["tech", "typo"],), NotFound),
        ("upsert_dimension_account", ("tech", "YouTube", "@x", 1), InvalidInput),
        ("upsert_dimension_account", ("tech", "youtube", "", 1), InvalidInput),
        ("upsert_dimension_account", ("tech", "youtube", "@x", -1), InvalidInput),
        ("upsert_dimension_account", ("nope", "youtube", "@x", 1), NotFound),
        ("upsert_dimension_account", ("news", "youtube", "@tech", 1), IdempotencyConflict),
        (
            "upsert_dimension_account",
            ("tech", "youtube", "@x", 1, True, "Mars/Olympus"),
            InvalidInput,
        ),
        ("upsert_dimension_account", ("tech", "youtube", "@x", 1, True, None), InvalidInput),
        ("upsert_dimension_account", ("tech", "youtube", "@x", 1, True, "UTC", -1), InvalidInput),
        ("upsert_dimension_account", ("tech", "youtube", "@x", 1, True, "UTC", None), InvalidInput),
        ("register_dimension", ("tech", "Tech 2", E, True, None), InvalidInput),
        (
            "register_dimension",
            ("tech", "Tech 2", E, True, Jsonb([{"platform": "youtube", "handle": "@tech"}])),
            InvalidInput,
        ),
        (
            "register_dimension",
            ("tech", "Tech 2", E, True, Jsonb([{**ACCOUNT, "daily_posts": 1.5}])),
            InvalidInput,
        ),
        (  # the second account fails after the first was written: the whole file is undone
            "register_dimension",
            (
                "tech",
                "Tech 2",
                E,
                True,
                Jsonb([ACCOUNT, {**ACCOUNT, "handle": "@x", "quota_timezone": "Mars/Olympus"}]),
            ),
            InvalidInput,
        ),
        ("register_dimension", ("news", "News 2", E, True, Jsonb([ACCOUNT])), IdempotencyConflict),
        ("set_dimension_accounts_active", ("tech", None), InvalidInput),
        ("set_dimension_accounts_active", ("tech", Jsonb([{"platform": "youtube"}])), InvalidInput),
        ("set_dimension_accounts_active", ("tech", Jsonb(["youtube/@tech"])), InvalidInput),
        ("set_dimension_accounts_active", ("nope", Jsonb([])), NotFound),
        (
            "set_dimension_accounts_active",
            ("news", Jsonb([{"platform": "youtube", "handle": "@tech"}])),
            NotFound,
        ),
        ("start_pipeline_run", (None, "tech", "p", None), InvalidInput),
        ("start_pipeline_run", (uuid.uuid4(), "tech", "", None), InvalidInput),
        ("start_pipeline_run", (uuid.uuid4(), "nope", "p", None), NotFound),
        ("start_pipeline_run", (uuid.uuid4(), "tech", "p", 999_999), LeaseLost),
        ("start_pipeline_run", (execution, "tech", "other", token), IdempotencyConflict),
        ("finish_pipeline_run", (execution, "done", E), InvalidInput),
        ("finish_pipeline_run", (execution, "failed", None), InvalidInput),
        ("finish_pipeline_run", (uuid.uuid4(), "failed", E), NotFound),
        ("unfinished_partitions", (None, ["tech"]), InvalidInput),
        ("unfinished_partitions", (date(2025, 6, 1), None), InvalidInput),
        ("unfinished_partitions", (date(2025, 6, 1), ["tech", None]), InvalidInput),
        ("upsert_work_unit", ("bogus", "k", E, token), InvalidInput),
        ("upsert_work_unit", (None, "k", E, token), InvalidInput),
        ("upsert_work_unit", ("topic", None, Jsonb(other), token), InvalidInput),
        ("upsert_work_unit", ("topic", "", Jsonb(other), token), InvalidInput),
        ("upsert_work_unit", ("topic", "k", None, token), InvalidInput),
        ("upsert_work_unit", ("topic", "k", Jsonb([other]), token), InvalidInput),
        ("upsert_work_unit", ("topic", "k", BIG, token), InvalidInput),
        (
            "upsert_work_unit",
            ("topic", "k", Jsonb({"dimension_id": ids["dim"]}), token),
            InvalidInput,
        ),
        ("upsert_work_unit", ("topic", "topic-1", Jsonb(other), token), IdempotencyConflict),
        ("transition", ("bogus", topic, "candidate", "approved", E, token), InvalidInput),
        ("transition", ("topic", None, "candidate", "approved", E, token), InvalidInput),
        ("transition", ("topic", topic, None, "approved", E, token), InvalidInput),
        ("transition", ("topic", topic, "candidate", "candidate", E, token), InvalidInput),
        ("transition", ("topic", topic, "candidate", "scripted", E, token), StateConflict),
        ("transition", ("topic", topic, "approved", "scripted", E, token), StateConflict),
        ("transition", ("topic", topic, "candidate", "approved", None, token), InvalidInput),
        ("transition", ("topic", topic, "candidate", "approved", BIG, token), InvalidInput),
        ("transition", ("topic", 999_999, "candidate", "approved", E, token), NotFound),
        ("bump_work_attempt", ("bogus", topic, E, token), InvalidInput),
        ("bump_work_attempt", ("topic", None, E, token), InvalidInput),
        ("bump_work_attempt", ("topic", topic, None, token), InvalidInput),
        ("bump_work_attempt", ("topic", 999_999, E, token), NotFound),
        ("enqueue_job", ("Bad Type", "k", E, 3, 100, 0), InvalidInput),
        ("enqueue_job", ("scene", None, E, 3, 100, 0), InvalidInput),
        ("enqueue_job", ("scene", "k", None, 3, 100, 0), InvalidInput),
        ("enqueue_job", ("scene", "k", BIG, 3, 100, 0), InvalidInput),
        ("enqueue_job", ("scene", "k", E, 0, 100, 0), InvalidInput),
        ("enqueue_job", ("scene", "k", E, 3, 100, -1), InvalidInput),
        ("enqueue_job", ("scene", "job-1", Jsonb({"n": 2}), 3, 100, 0), IdempotencyConflict),
        ("claim_job", (None, "w", 10), InvalidInput),
        ("claim_job", ("scene", "", 10), InvalidInput),
        ("claim_job", ("scene", "w", 0), InvalidInput),
        ("claim_job", ("scene", "w", None), InvalidInput),
        ("claim_scene_job", (None, "w", 10), InvalidInput),
        ("claim_scene_job", ("job-1", "", 10), InvalidInput),
        ("claim_scene_job", ("job-1", "w", 0), InvalidInput),
        ("claim_scene_job", ("job-1", "w", 10), InvalidInput),  # no scene_hash: not a scene's
        ("claim_scene_job", ("no-such-job", "w", 10), NotFound),
        ("heartbeat_job", (None, "w", 1, lease, 10), InvalidInput),
        ("heartbeat_job", (job, None, 1, lease, 10), InvalidInput),
        ("heartbeat_job", (job, "w", 1, None, 10), InvalidInput),
        ("heartbeat_job", (job, "w", 1, lease, 0), InvalidInput),
        ("heartbeat_job", (job, "intruder", 1, lease, 10), LeaseLost),
        ("heartbeat_job", (job, "w", 1, lease + 1, 10), LeaseLost),
        ("heartbeat_job", (999_999, "w", 1, lease, 10), NotFound),
        ("complete_job", (job, "w", 0, lease, E), InvalidInput),
        ("complete_job", (job, "w", 1, None, E), InvalidInput),
        ("complete_job", (job, "w", 1, lease, None), InvalidInput),
        ("complete_job", (job, "w", 2, lease, E), LeaseLost),
        ("complete_job", (job, "w", 1, lease + 1, E), LeaseLost),
        ("fail_job", (job, "w", 1, lease, "", True, 0), InvalidInput),
        ("fail_job", (job, "w", 1, None, "e", True, 0), InvalidInput),
        ("fail_job", (job, "w", 1, lease, "e", None, 0), InvalidInput),
        ("fail_job", (job, "w", 1, lease, "e", True, -1), InvalidInput),
        ("fail_job", (job, "intruder", 1, lease, "e", True, 0), LeaseLost),
        ("fail_job", (job, "w", 1, lease + 1, "e", True, 0), LeaseLost),
        ("requeue_dead_job", (None, "w", 1, "gone"), InvalidInput),
        ("requeue_dead_job", (job, "", 1, "gone"), InvalidInput),
        ("requeue_dead_job", (job, "w", 1, ""), InvalidInput),
        ("reap_expired_jobs", ("",), InvalidInput),
        ("lookup_scene_cache", (None,), InvalidInput),
        ("lookup_scene_cache", ("",), InvalidInput),
        ("put_scene_cache", (None, "u", SHA, 10), InvalidInput),
        ("put_scene_cache", ("h", "", SHA, 10), InvalidInput),
        ("put_scene_cache", ("h", "u", "not-a-sha", 10), InvalidInput),
        ("put_scene_cache", ("h", "u", SHA, -1), InvalidInput),
        ("put_scene_cache", ("h", "u", SHA, 10, Jsonb([])), InvalidInput),
        ("set_budget_cap", ("bad scope!", "p", 1), InvalidInput),
        ("set_budget_cap", ("s", None, 1), InvalidInput),
        ("set_budget_cap", ("s", "p", -1), InvalidInput),
        ("reserve_budget", ("tts", "2025-06", -1, "k"), InvalidInput),
        ("reserve_budget", ("tts", "2025-06", 1, None), InvalidInput),
        ("reserve_budget", ("tts", "2025-07", 1, "k"), NotFound),
        ("reserve_budget", ("tts", "2025-06", 2, "budget-open"), IdempotencyConflict),
        ("settle_budget", ("budget-open", -1), InvalidInput),
        ("settle_budget", (None, 1), InvalidInput),
        ("settle_budget", ("never", 1), NotFound),
        ("settle_budget", ("budget-settled", 1), StateConflict),
        ("release_budget", (None,), InvalidInput),
        ("release_budget", ("never",), NotFound),
        ("release_budget", ("budget-settled",), StateConflict),
        ("reserve_quota", (account, -1, "k"), InvalidInput),
        ("reserve_quota", (account, None, "k"), InvalidInput),
        ("reserve_quota", (None, 1, "k"), InvalidInput),
        ("reserve_quota", (account, 1, ""), InvalidInput),
        ("reserve_quota", (999_999, 1, "k"), NotFound),
        ("reserve_quota", (account, 11, "quota-open"), IdempotencyConflict),
        ("commit_quota", (None,), InvalidInput),
        ("commit_quota", ("never",), NotFound),
        ("release_quota", ("",), InvalidInput),
        ("release_quota", ("quota-committed",), StateConflict),
        ("record_attempt", ("wk", "p", "h", "maybe", E, token), InvalidInput),
        ("record_attempt", (None, "p", "h", "failed", E, token), InvalidInput),
        ("record_attempt", ("wk", "p", "h", "failed", BIG, token), InvalidInput),
        ("record_attempt", ("blocked", "gemini", "h2", "submitted", E, token), ReconcileRequired),
        ("finish_attempt", (unknown, "submitted", E, token), InvalidInput),
        ("finish_attempt", (None, "failed", E, token), InvalidInput),
        ("finish_attempt", (999_999, "failed", E, token), NotFound),
        ("finish_attempt", (done, "failed", E, token), StateConflict),
        ("reconcile_attempt", (unknown, "unknown", E, token, None), InvalidInput),
        ("reconcile_attempt", (None, "failed", E, token, None), InvalidInput),
        ("reconcile_attempt", (done, "failed", E, token, None), StateConflict),
        ("record_review", (render, "XYZ", "technical", "approved", E, token), InvalidInput),
        ("record_review", (render, SHA, "Bad Name", "approved", E, token), InvalidInput),
        ("record_review", (render, SHA, "technical", "maybe", E, token), InvalidInput),
        ("record_review", (None, SHA, "technical", "approved", E, token), InvalidInput),
        ("record_review", (999_999, SHA, "technical", "approved", E, token), NotFound),
        ("is_approved", (None, SHA, ["technical"]), InvalidInput),
        ("is_approved", (render, "short", ["technical"]), InvalidInput),
        ("is_approved", (render, SHA, []), InvalidInput),
        ("is_approved", (render, SHA, None), InvalidInput),
        ("is_approved", (render, SHA, ["Bad Name"]), InvalidInput),
        ("is_approved", (999_999, SHA, ["technical"]), NotFound),
        (
            "log_safety_decision",
            ("Topic", "k", "tech", "allow", "r", Jsonb([]), "c", token),
            InvalidInput,
        ),
        (
            "log_safety_decision",
            ("topic", "", "tech", "allow", "r", Jsonb([]), "c", token),
            InvalidInput,
        ),
        (
            "log_safety_decision",
            ("topic", "k", "tech", "maybe", "r", Jsonb([]), "c", token),
            InvalidInput,
        ),
        ("log_safety_decision", ("topic", "k", "tech", "allow", "r", E, "c", token), InvalidInput),
        (
            "log_safety_decision",
            ("topic", "k", None, "allow", "", Jsonb([]), "c", token),
            InvalidInput,
        ),
        (
            "log_safety_decision",
            ("topic", "k", "nope", "allow", "r", Jsonb([]), "c", token),
            NotFound,
        ),
        ("record_trends", ("tech", E, token), InvalidInput),
        ("record_trends", ("nope", Jsonb([]), token), NotFound),
        (
            "record_trends",
            ("tech", Jsonb([{"key": "k", "payload": {"dimension_id": 0}}]), token),
            InvalidInput,
        ),
        ("decide_topic", ("k", Jsonb(other), None, token), InvalidInput),
        (
            "decide_topic",
            ("k", Jsonb(other), Jsonb({"verdict": "maybe", "rule": "r"}), token),
            InvalidInput,
        ),
        ("record_script", ("k", Jsonb({**other, "topic_id": topic}), E, token), InvalidInput),
        ("plan_scenes", (script, E, "scene_clip", 3, "p", token), InvalidInput),
        ("plan_scenes", (script, Jsonb([]), "scene_clip", 3, "p", token), StateConflict),
        ("plan_scenes", (999_999, Jsonb([]), "scene_clip", 3, "p", token), NotFound),
        ("complete_scene_job", (job, "w", 1, lease, "u", "bad", False, 10), InvalidInput),
        ("complete_scene_job", (job, "w", 1, lease, "u", SHA, None, 10), InvalidInput),
        ("complete_scene_job", (job, "w", 1, None, "u", SHA, False, 10), InvalidInput),
        ("complete_scene_job", (job, "intruder", 1, lease, "u", SHA, False, 10), LeaseLost),
        ("complete_scene_job", (job, "w", 1, lease + 1, "u", SHA, False, 10), LeaseLost),
        ("complete_scene_job", (job, "w", 1, lease, "u", SHA, False, 10, Jsonb([])), InvalidInput),
        ("reject_scene_job", (job, "w", 1, lease, Jsonb({})), InvalidInput),
        ("reject_scene_job", (job, "w", 1, None, Jsonb([])), InvalidInput),
        ("reject_scene_job", (job, "w", 1, lease, Jsonb(["x" * 17_000])), InvalidInput),
        ("reject_scene_job", (job, "intruder", 1, lease, Jsonb(["why"])), LeaseLost),
        ("defer_scene_job", (job, "w", 1, lease, None, "wait"), InvalidInput),
        ("defer_scene_job", (job, "w", 1, lease, FAR_FUTURE, "wait"), InvalidInput),
        ("defer_scene_job", (job, "w", 1, lease, SOON, ""), InvalidInput),
        ("defer_scene_job", (job, "w", 1, lease + 1, SOON, "wait"), LeaseLost),
        ("finish_visuals", (script, token), StateConflict),
        ("finish_visuals", (None, token), InvalidInput),
        ("record_voice", (script, "v", Jsonb({"script_id": script}), token), StateConflict),
        (
            "record_render",
            (script, "r", Jsonb({"script_id": script}), "technical", token),
            StateConflict,
        ),
        ("begin_upload", ("pu", Jsonb(pub), 1, "p", ["technical"], 0, token), InvalidInput),
        (
            "begin_upload",
            ("pu", Jsonb({**pub, "content_sha256": SHA}), 1, "p", ["safety"], 0, token),
            StateConflict,
        ),
        ("reserve_bucket_quota", (account, "nope", 1, "k"), InvalidInput),
        ("reserve_bucket_quota", (account, "insert", 0, "k"), InvalidInput),
        ("reserve_bucket_quota", (999_999, "insert", 1, "k"), NotFound),
        ("reserve_bucket_quota", (account, "insert", 10, "quota-open"), IdempotencyConflict),
        ("take_call_slot", (account, "Init!", 6, 60_000, token), InvalidInput),
        ("take_call_slot", (account, "init", 0, 60_000, token), InvalidInput),
        ("take_call_slot", (account, "init", 6, 0, token), InvalidInput),
        ("take_call_slot", (999_999, "init", 6, 60_000, token), NotFound),
        ("pause_account", (account, "because", token), InvalidInput),
        ("pause_account", (999_999, "quotaExceeded", token), NotFound),
        ("mark_needs_reauth", (account, "", token), InvalidInput),
        ("mark_needs_reauth", (999_999, "r", token), NotFound),
        ("store_account_credential", (account, "xyz", b"1" * 60, b"2" * 40), InvalidInput),
        ("store_account_credential", (account, "0" * 16, b"1" * 3, b"2" * 40), InvalidInput),
        ("store_account_credential", (999_999, "0" * 16, b"1" * 60, b"2" * 40), NotFound),
        (
            "replace_rotated_credential",
            (account, "xyz", b"1" * 60, b"2" * 40, b"c" * 40, token),
            InvalidInput,
        ),
        (
            "replace_rotated_credential",
            (account, "0" * 16, b"1" * 3, b"2" * 40, b"c" * 40, token),
            InvalidInput,
        ),
        (
            "replace_rotated_credential",
            (999_999, "0" * 16, b"1" * 60, b"2" * 40, b"c" * 40, token),
            NotFound,
        ),
        (
            "replace_rotated_credential",
            (account, "1" * 16, b"1" * 60, b"2" * 40, b"c" * 40, token),
            StateConflict,
        ),
        ("rewrap_account_credentials", ("0" * 16, "1" * 16, E), InvalidInput),
        ("rewrap_account_credentials", ("bad", "1" * 16, Jsonb([])), InvalidInput),
        (
            "rewrap_account_credentials",
            ("0" * 16, "1" * 16, Jsonb([{"account_id": account, "wrapped_key": "AAAA"}])),
            InvalidInput,
        ),
        (
            "begin_bucket_upload",
            ("pu", Jsonb({**pub, "content_sha256": SHA}), "nope", 1, "p", ["technical"], 0, token),
            InvalidInput,
        ),
        ("begin_bucket_upload", ("pu", Jsonb(pub), "insert", 1, "p", [], 0, token), InvalidInput),
        ("open_upload_session", (unknown, "ftp://x", SHA, 1, token), InvalidInput),
        ("open_upload_session", (done, "http://x", SHA, 1, token), NotFound),
        ("open_upload_session", (done, "http://x", SHA, 0, token), InvalidInput),
        ("resume_upload", (999_999, token), NotFound),
        # 0027: the initiation's charge, a gone session's recheck, the request deadline.
        ("upload_lease", (999_999, token), NotFound),
        ("settle_orphaned_paid_calls", ("nope", token), NotFound),
        ("settle_orphaned_paid_calls", (None, token), InvalidInput),
        ("record_upload_initiation", (unknown, None, "r", token), InvalidInput),
        ("record_upload_initiation", (unknown, False, "", token), InvalidInput),
        ("record_upload_initiation", (999_999, True, None, token), NotFound),
        ("record_session_gone", (unknown, None, 300.0, token), InvalidInput),
        ("record_session_gone", (unknown, "2999-01-01T00:00:00Z", 300.0, token), InvalidInput),
        ("record_session_gone", (unknown, "2025-01-01T00:00:00Z", -1.0, token), InvalidInput),
        ("record_session_gone", (999_999, "2025-01-01T00:00:00Z", 300.0, token), NotFound),
        ("record_video_processing", (999_999, "succeeded", E, token), NotFound),
        ("record_video_processing", (1, "maybe", E, token), InvalidInput),
        ("retire_publication", (999_999, "deactivated", token), NotFound),
        ("retire_publication", (1, "", token), InvalidInput),
        # issue 11, slice "probe" (0014)
        (
            "record_bound_review",
            (render, SHA, "content", "approved", E, "x", E, token),
            InvalidInput,
        ),
        (
            "record_bound_review",
            (render, SHA, "content", "approved", E, SHA, Jsonb([]), token),
            InvalidInput,
        ),
        ("record_bound_review", (render, SHA, "Bad", "approved", E, SHA, E, token), InvalidInput),
        ("record_bound_review", (None, SHA, "content", "approved", E, SHA, E, token), InvalidInput),
        ("record_bound_review", (999_999, SHA, "content", "approved", E, SHA, E, token), NotFound),
        ("record_reviewed_render", (script, "k", E, Jsonb([]), token), InvalidInput),
        ("record_reviewed_render", (script, "k", E, E, token), InvalidInput),
        ("record_thumbnail", (999_999, "set", E, token), NotFound),
        ("record_thumbnail", (1, "maybe", E, token), InvalidInput),
        ("record_thumbnail", (None, "set", E, token), InvalidInput),
        ("finish_upload", (None, "failed", None, E, token), InvalidInput),
        ("finish_upload", (done, "failed", None, E, token), NotFound),
        ("reconcile_upload", (999_999, None, "2025-06-01", token), NotFound),
        ("reconcile_upload", (1, None, None, token), InvalidInput),
        ("requeue_scenes", (script, E, "r", "scene_clip", 3, "p", token), InvalidInput),
        ("requeue_scenes", (script, Jsonb([]), "", "scene_clip", 3, "p", token), InvalidInput),
        ("requeue_scenes", (script, Jsonb([]), "r", "scene_clip", 3, "p", token), StateConflict),
        ("requeue_scenes", (999_999, Jsonb([]), "r", "scene_clip", 3, "p", token), NotFound),
        ("requeue_voice", (script, 1, "", token), InvalidInput),
        ("requeue_voice", (script, 1, "r", token), StateConflict),
        ("requeue_voice", (999_999, 1, "r", token), NotFound),
        ("requeue_render", (script, 1, None, token), InvalidInput),
        ("requeue_render", (script, 1, "r", token), StateConflict),
        ("requeue_render", (999_999, 1, "r", token), NotFound),
        ("fail_script", (script, "drafted", "", token), InvalidInput),
        ("fail_script", (script, None, "r", token), InvalidInput),
        ("fail_script", (script, "publishing", "r", token), StateConflict),
        ("fail_script", (999_999, "drafted", "r", token), NotFound),
        # Voice HALT with a backoff retry (0009, 0022); the script is drafted, never halted.
        ("halt_voice", (script, "", False, 900, 3600, LATER, token), InvalidInput),
        ("halt_voice", (script, "r", None, 900, 3600, LATER, token), InvalidInput),
        ("halt_voice", (script, "r", False, 0, 3600, LATER, token), InvalidInput),
        ("halt_voice", (script, "r", False, 900, 60, LATER, token), InvalidInput),
        ("halt_voice", (script, "r", False, 900, 3600, None, token), InvalidInput),
        ("halt_voice", (script, "r", False, 900, 3600, LATER, token), StateConflict),
        ("halt_voice", (999_999, "r", False, 900, 3600, LATER, token), NotFound),
        ("retry_halted_voice", (script, token), StateConflict),
        ("retry_halted_voice", (999_999, token), NotFound),
        ("begin_paid_call", ("tech", "", "p", "h", 10, 100, 3, 0, E, token), InvalidInput),
        ("begin_paid_call", ("tech", "wk", "p", "h", -1, 100, 3, 0, E, token), InvalidInput),
        ("begin_paid_call", ("tech", "wk", "p", "h", 10, 100, 0, 0, E, token), InvalidInput),
        ("begin_paid_call", ("tech", "wk", "p", "h", 10, -5, 3, 0, E, token), InvalidInput),
        ("begin_paid_call", ("nope", "wk", "p", "h", 10, 100, 3, 0, E, token), NotFound),
        ("settle_paid_call", (None, "succeeded", 1, E, token), InvalidInput),
        ("settle_paid_call", (done, "succeeded", 1, E, token), NotFound),
        ("release_paid_call", (unknown, E, token), NotFound),
        ("mark_paid_call_unknown", (999_999, E, token), NotFound),
        # Failure classes and refusals of paid calls (0019).
        ("refuse_paid_call", (999_999, "model", E, token), NotFound),
        ("refuse_paid_call", (None, "model", E, token), InvalidInput),
        ("rearm_paid_calls", ("nope", None, "r"), NotFound),
        ("rearm_paid_calls", ("tech", None, ""), InvalidInput),
        ("invalidate_scene_cache", ("", "u", "r"), InvalidInput),
        ("invalidate_scene_cache", ("h", "u", None), InvalidInput),
        # 0010 (feeds): the trend sources' conditional-GET cache.
        ("get_feed_cache", ("",), InvalidInput),
        ("get_feed_cache", ("https://h/v?key=secret",), InvalidInput),
        ("record_feed_fetch", ("", None, None, Jsonb([]), "tech", token), InvalidInput),
        (
            "record_feed_fetch",
            ("https://h/v?a=1&key=secret", None, None, Jsonb([]), "tech", token),
            InvalidInput,
        ),
        ("record_feed_fetch", ("https://h/f", None, None, E, "tech", token), InvalidInput),
        (
            "record_feed_fetch",
            ("https://h/f", None, None, Jsonb(["x" * 262_144]), "tech", token),
            InvalidInput,
        ),
        (
            "record_feed_fetch",
            ("https://h/f", "x" * 1001, None, Jsonb([]), "tech", token),
            InvalidInput,
        ),
        (
            "record_feed_fetch",
            ("https://never-fetched/f", '"e"', None, None, "tech", token),
            NotFound,
        ),
        ("record_feed_failure", ("https://h/f", "", None), InvalidInput),
        ("record_feed_failure", ("https://h/f", None, None), InvalidInput),
        ("record_feed_failure", ("https://h/v?key=secret", "r", None), InvalidInput),
        # 0015 (issue 12, alerts): one alert per dimension, cause and day, under its lock.
        ("record_alert", ("Bad Slug", "halt", "2025-06-01", "t", 120, token), InvalidInput),
        ("record_alert", ("tech", "meltdown", "2025-06-01", "t", 120, token), InvalidInput),
        ("record_alert", ("tech", "halt", None, "t", 120, token), InvalidInput),
        ("record_alert", ("tech", "halt", "2025-06-01", "", 120, token), InvalidInput),
        ("record_alert", ("tech", "halt", "2025-06-01", "t", 0, token), InvalidInput),
        ("mark_alert_delivered", (None, claim), InvalidInput),
        ("mark_alert_delivered", (held, None), InvalidInput),
        ("mark_alert_delivered", (999_999, claim), NotFound),
        ("mark_alert_delivered", (held, STALE), LeaseLost),  # another holder's claim
        ("mark_alert_failed", (999_999, "e", claim), NotFound),
        ("mark_alert_failed", (None, "e", claim), InvalidInput),
        ("mark_alert_failed", (held, "", claim), InvalidInput),
        ("mark_alert_failed", (held, "e", None), InvalidInput),
        ("mark_alert_failed", (held, "e", STALE), LeaseLost),
        ("mark_alert_failed", (ids["alert"], "e", claim), StateConflict),  # already delivered
        # 0023: a claim is renewed by its holder only.
        ("renew_alert_claim", (held, claim, 0), InvalidInput),
        ("renew_alert_claim", (None, claim, 120), InvalidInput),
        ("renew_alert_claim", (held, None, 120), InvalidInput),
        ("renew_alert_claim", (999_999, claim, 120), NotFound),
        ("renew_alert_claim", (held, STALE, 120), LeaseLost),
        ("renew_alert_claim", (ids["alert"], claim, 120), StateConflict),  # delivered
        ("claim_undelivered_alerts", (0, 120, 7), InvalidInput),
        ("claim_undelivered_alerts", (10, 0, 7), InvalidInput),
        ("claim_undelivered_alerts", (10, 120, 0), InvalidInput),
        # Slice "adaptive" (0017): parameter sets.
        (
            "apply_param_set",
            (
                "nope",
                "2025-06-09",
                "2025-06-16",
                Jsonb({"videos_per_day": 1}),
                Jsonb([]),
                "x",
                token,
            ),
            NotFound,
        ),
        (
            "apply_param_set",
            (
                "tech",
                None,
                "2025-06-16",
                Jsonb({"videos_per_day": 1}),
                Jsonb([]),
                "x",
                token,
            ),
            InvalidInput,
        ),
        (
            "apply_param_set",
            (
                "tech",
                "2025-06-09",
                "2025-06-16",
                Jsonb({"videos_per_day": 3}),
                Jsonb([]),
                "x",
                token,
            ),
            InvalidInput,
        ),
        (
            "apply_param_set",
            (
                "tech",
                "2025-06-09",
                "2025-06-16",
                Jsonb({"videos_per_day": 9}),
                Jsonb([]),
                "x",
                token,
            ),
            InvalidInput,
        ),
        (
            "apply_param_set",
            (
                "tech",
                "2025-06-09",
                "2025-06-16",
                Jsonb({"hook_threshold": 0.9}),
                Jsonb([]),
                "x",
                token,
            ),
            InvalidInput,
        ),
        (
            "apply_param_set",
            ("tech", "2025-06-09", "2025-06-16", Jsonb({"x": 1}), Jsonb([]), "x", token),
            InvalidInput,
        ),
        (
            "apply_param_set",
            (
                "tech",
                "2025-06-09",
                "2025-06-16",
                Jsonb({"videos_per_day": 1}),
                E,
                "x",
                token,
            ),
            InvalidInput,
        ),
        (
            "apply_param_set",
            (
                "tech",
                "2025-06-09",
                "2025-06-16",
                Jsonb({"videos_per_day": 1}),
                Jsonb([]),
                "",
                token,
            ),
            InvalidInput,
        ),
        (
            "apply_param_set",
            (
                "tech",
                "2025-06-02",
                "2025-06-09",
                Jsonb({"videos_per_day": 2}),
                Jsonb([]),
                "x",
                token,
            ),
            StateConflict,
        ),
        ("rollback_param_set", ("tech", ""), InvalidInput),
        ("rollback_param_set", ("nope", "r"), NotFound),
        ("rollback_param_set", ("news", "r"), NotFound),
        # 0016 (issue 12, auditor): video statistics and weekly reports.
        ("record_video_stats", (None, Jsonb([]), token), InvalidInput),
        ("record_video_stats", (date(2026, 11, 23), E, token), InvalidInput),
        (
            "record_video_stats",
            (date(2026, 11, 23), Jsonb([{"publication_id": 1}]), token),
            InvalidInput,
        ),
        ("store_report", ("tech", date(2026, 11, 24), E, "# r", Jsonb([]), token), InvalidInput),
        ("store_report", ("tech", date(2026, 11, 23), E, "", Jsonb([]), token), InvalidInput),
        ("store_report", ("nope", date(2026, 11, 23), E, "# r", Jsonb([]), token), NotFound),
        ("auditor_facts", (None, date(2026, 11, 23), date(2026, 11, 29)), InvalidInput),
        ("auditor_facts", (1, date(2026, 11, 29), date(2026, 11, 23)), InvalidInput),
        ("auditor_facts", (1, date(2025, 11, 23), date(2026, 11, 29)), InvalidInput),
        # 0018 (retention): what stored media may be collected, and collecting it.
        ("collectable_media", (E, 10), InvalidInput),
        ("collectable_media", (RETAIN, 0), InvalidInput),
        ("collectable_media", (Jsonb({"render_days": -1, "voice_days": 7}), 10), InvalidInput),
        ("begin_media_collection", ("media://x", RETAIN, "h"), InvalidInput),
        ("begin_media_collection", (CLIP_URI, RETAIN, ""), InvalidInput),
        ("begin_media_collection", (CLIP_URI, Jsonb([]), "h"), InvalidInput),
        ("finish_media_collection", (CLIP_URI, -1), InvalidInput),
        ("finish_media_collection", (CLIP_URI, 1), NotFound),
        ("abandon_media_collection", ("",), InvalidInput),
        # 0024 (retention): a collected object is stored again before it is named.
        ("media_collection_mark", ("media://x",), InvalidInput),
        ("media_stored_again", ("", LATER), InvalidInput),
        ("media_stored_again", (CLIP_URI, None), InvalidInput),
    ]


def _snapshot(owner: psycopg.Connection) -> dict[str, tuple[int, str]]:
    """Row count and a content hash of every mdame table."""
    tables = [
        r[0]
        for r in owner.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
            WHERE n.nspname = 'mdame' AND c.relkind = 'r'"""
        ).fetchall()
    ]
    snapshot = {}
    for table in tables:
        query = sql.SQL(
            "SELECT count(*), md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) "
            "FROM mdame.{} t"
        ).format(sql.Identifier(table))
        snapshot[table] = owner.execute(query).fetchone()
    return snapshot


def _caller(owner, state: StateStore, rpc: str, nargs: int) -> StateStore:
    """The app client when the app may execute the version `nargs` arguments resolve to, else
    the operator's admin client (0025)."""
    row = owner.execute(
        """SELECT bool_or(has_function_privilege('mdame_app', p.oid, 'EXECUTE'))
             FROM pg_proc p
            WHERE p.pronamespace = 'mdame'::regnamespace AND p.proname = %s
              AND p.pronargs >= %s AND p.pronargs - p.pronargdefaults <= %s""",
        [rpc, nargs, nargs],
    ).fetchone()
    return state if row and row[0] else as_admin(state)


def test_bad_input_to_every_rpc_raises_and_changes_nothing(state, owner) -> None:
    cases = _cases(_populate(state))
    before = _snapshot(owner)
    empty = {table for table, (count, _) in before.items() if count == 0}
    # An upload session needs a publication in flight, which these cases never reach.
    assert empty <= {
        "trends",
        "scenes",
        "voice_tracks",
        "publications",
        "upload_sessions",
        "voice_halts",
        "video_stats",  # 0016: needs a published video
        "media_collections",  # 0018: filled by housekeeping only
        "paid_call_refusals",  # 0019: needs a provider's refusal
        "upload_charges",  # 0027: needs an initiation in flight
        "call_windows",  # 0029: needs a paced call
    }

    for rpc, args, expected in cases:
        with pytest.raises(StateError) as err:
            _caller(owner, state, rpc, len(args)).call(rpc, *args)
        error = err.value
        assert type(error) is expected, f"{rpc}{args!r}: {error!r}"
        assert error.message.startswith("mdame: "), f"{rpc}: {error.message}"
        assert error.sqlstate and error.sqlstate.startswith("MD"), rpc

    assert _snapshot(owner) == before


def test_every_rpc_has_bad_input_cases(owner) -> None:
    rpcs = {
        r[0]
        for r in owner.execute(
            """SELECT p.proname FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
            WHERE n.nspname = 'mdame' AND p.prosecdef
              AND (has_function_privilege('mdame_app', p.oid, 'EXECUTE')
                   OR has_function_privilege('mdame_admin', p.oid, 'EXECUTE'))"""
        ).fetchall()
    }
    dummy = {
        k: 1
        for k in (
            "job",
            "lease",
            "render",
            "topic",
            "token",
            "dim",
            "account",
            "attempt_unknown",
            "attempt_done",
            "script",
            "alert",
            "held_alert",
        )
    }
    dummy["execution"] = dummy["held_claim"] = uuid.uuid4()
    covered = {rpc for rpc, _, _ in _cases(dummy)}
    assert rpcs == covered


def test_errors_cut_the_inputs_they_echo(state, owner) -> None:
    """A 100 kB slug, key or name comes back as its first 80 characters and its length."""
    huge = "x" * 100_000
    as_admin(state).upsert_dimension("tech", "Tech")
    account = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 100)
    as_admin(state).set_budget_cap("tts", "2025-06", 1_000)
    calls: list[tuple[str, tuple[Any, ...]]] = [
        ("upsert_dimension", (huge, "t", E, True)),
        ("upsert_dimension_account", ("tech", huge, "@x", 1)),
        ("upsert_dimension_account", ("tech", "youtube", "@x", 1, True, huge[:64])),
        ("set_dimensions_active", ([huge],)),
        ("set_dimension_accounts_active", ("tech", Jsonb([{"platform": huge, "handle": huge}]))),
        ("is_approved", (1, SHA, [huge])),
        ("is_approved", (1, huge, ["technical"])),
        ("reserve_budget", (huge[:200], "2025-06", 1, "k")),
        ("settle_budget", (huge, 1)),
        ("reserve_quota", (account, 1, huge)),
        # Fenced RPCs: whichever check refuses first, the message stays short.
        ("transition", (huge, 1, "a", "b", E, None)),
        ("record_review", (1, SHA, huge, "approved", E, None)),
        ("record_review", (1, SHA, "technical", huge, E, None)),
        ("record_bound_review", (1, SHA, "content", "approved", E, huge, E, None)),
        ("record_thumbnail", (1, huge, E, None)),
    ]
    for rpc, args in calls:
        with pytest.raises(StateError) as err:
            _caller(owner, state, rpc, len(args)).call(rpc, *args)
        assert len(err.value.message) < 300, f"{rpc}: {len(err.value.message)} characters"
        assert err.value.sqlstate.startswith("MD"), f"{rpc}: {err.value.message}"
    with pytest.raises(InvalidInput) as err:
        as_admin(state).upsert_dimension(huge, "t")
    assert "'" + "x" * 80 + "'... (100000 characters)" in err.value.message
