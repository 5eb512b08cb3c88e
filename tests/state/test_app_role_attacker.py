"""With the app role's credentials alone (any host with the app URL: a GPU worker, a code
server), no one can read a token, settle, release or overwrite another holder's work, read a
session URI or change a dimension's parameters.

A victim holds the dimension's lock with a paid call and an upload (its session opened) in
flight and a stored grant, a GPU worker holds a scene job's lease, an alert sender holds an
alert's claim. The attacker reads every column the app role may read, then calls every RPC the
app role may execute with every value it read in each credential argument: every call is
refused, nothing changes, and the holders carry on."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import asdict
from datetime import UTC, date, datetime, timedelta
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.types.json import Jsonb

from mdame_core.state import StateStore
from mdame_domain.adaptive import AdaptiveLimits
from tests.adminkit import as_admin
from tests.state.test_fencing import DAY, SHA, _cases, _chain, _fingerprint, hold

SOON = datetime.now(UTC) + timedelta(hours=1)  # within what a deferral may ask

SESSION_URI = "https://upload.example/upload/session?upload_id=victim-session-bearer"
SCENE = "c" * 64
LOCK = "pipeline:tech"


@pytest.fixture
def attacker(fresh_db) -> Iterator[psycopg.Connection]:
    with psycopg.connect(fresh_db.app, autocommit=True) as conn:
        yield conn


def _victims(state: StateStore) -> dict[str, Any]:
    """Work in flight under other holders' credentials, and those credentials."""
    victim = hold(state, "tech", holder="victim-run:publications")
    ids = _chain(victim)  # a paid call and an upload attempt in flight under the victim's lock
    config = {"daily_budget_micros": 1_000, "adaptive": asdict(AdaptiveLimits())}
    as_admin(state).upsert_dimension("tech", "Tech", config)  # parameters it may tune
    victim.start_pipeline_run(uuid.uuid4(), "tech", f"{DAY}|tech", victim.fence.secret)
    victim.transition("publication", ids["publication"], "pending", "uploading")
    victim.open_upload_session(ids["attempt"], SESSION_URI, SHA, 10)
    as_admin(state).store_account_credential(ids["account"], "0" * 16, b"w" * 60, b"c" * 40)
    as_admin(state).enqueue_job("scene_clip", "victim-scene", {"scene_hash": SCENE})
    claim = state.claim_scene_job("victim-scene", "gpu-host:4242", 600)
    assert claim.job is not None
    alert = victim.record_alert("tech", "halt", date.fromisoformat(DAY), "voice failed")
    assert alert.claim_token is not None
    return {
        **ids,
        "victim": victim,
        "job": claim.job,
        "alert": alert.alert_id,
        "claim": alert.claim_token,
    }


def _read_everything(conn: psycopg.Connection) -> dict[str, list[tuple[Any, ...]]]:
    """Every column of every relation of the schema that the app role may read."""
    columns: dict[str, list[str]] = {}
    for rel, col in conn.execute(
        """SELECT c.relname, a.attname FROM pg_class c
             JOIN pg_namespace n ON n.oid = c.relnamespace
             JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
            WHERE n.nspname = 'mdame' AND c.relkind IN ('r', 'v', 'm', 'p')
              AND has_column_privilege(c.oid, a.attnum, 'SELECT')
            ORDER BY c.relname, a.attnum"""
    ):
        columns.setdefault(rel, []).append(col)
    assert {"system_locks", "jobs", "alerts", "upload_sessions", "provider_attempts"} <= set(
        columns
    )
    return {
        rel: conn.execute(
            sql.SQL("SELECT {} FROM {}").format(
                sql.SQL(", ").join(map(sql.Identifier, cols)), sql.Identifier("mdame", rel)
            )
        ).fetchall()
        for rel, cols in columns.items()
    }


def _values(value: Any) -> Iterator[Any]:
    """A value and, inside JSON, every value it holds."""
    if isinstance(value, dict):
        for v in value.values():
            yield from _values(v)
    elif isinstance(value, list):
        for v in value:
            yield from _values(v)
    else:
        yield value


def _refused(conn: psycopg.Connection, rpc: str, args: tuple[Any, ...]) -> str | None:
    """None when the database refused the call; what it returned otherwise."""
    placeholders = sql.SQL(", ").join(sql.Placeholder() * len(args))
    query = sql.SQL("SELECT * FROM mdame.{}({})").format(sql.Identifier(rpc), placeholders)
    try:
        rows = conn.execute(query, args).fetchall()
    except psycopg.Error:
        return None
    return f"{rpc}{args!r} returned {rows!r}"


def _accepted_with(dsn: str, cases: list[tuple[str, tuple[Any, ...]]]) -> set[str]:
    """The RPCs of `cases` the database accepts, each tried in a transaction rolled back."""
    accepted = set()
    with psycopg.connect(dsn) as conn:
        for rpc, args in cases:
            try:
                with conn.transaction(force_rollback=True):
                    if _refused(conn, rpc, args) is not None:
                        accepted.add(rpc)
            except psycopg.Error:
                pass
    return accepted


# What the app role may execute besides the credential-taking RPCs tried below, and why none of
# them settles, releases or overwrites another holder's work.
NOT_ANOTHER_HOLDERS_WORK = {
    "acquire_pipeline_lock": "tried: refused (no row) while the victim holds the lock",
    "claim_job": "tried: hands out only a job no live lease holds",
    "claim_scene_job": "tried: a job under a live lease is only reported as held",
    "claim_undelivered_alerts": "tried: hands out only alerts no live claim holds",
    "reap_expired_jobs": "tried: moves only expired leases",
    "record_alert": "an occurrence of an alert; a dimension's under its lock (test_fencing)",
    "finish_pipeline_run": "after a run ended; a failure replaces a success, never the reverse",
    "unfinished_partitions": "read",
    "auditor_facts": "read",
    "collectable_media": "read",
    "dimension_lock_name": "pure function",
    "get_feed_cache": "read",
    "is_approved": "read",
    "lookup_scene_cache": "read",
    "media_collection_mark": "read",
    # The retention marks are keyed by the object's URI, not bound to a sweeper's secret (and
    # begin takes over a 'collecting' mark at once): another host may mark, finish or drop a
    # collection. What that costs is media stored or generated again (media is verified when
    # read), no money, grant or parameter.
    "media_stored_again": "retention mark, by URI (see above)",
    "begin_media_collection": "retention mark, by URI (see above)",
    "finish_media_collection": "retention mark, by URI (see above)",
    "abandon_media_collection": "retention mark, by URI (see above)",
    "record_feed_failure": "a source's failure count: no holder's work",
}


def test_the_app_role_alone_can_neither_read_a_secret_nor_settle_another_holders_work(
    state, owner, attacker
) -> None:
    v = _victims(state)
    victim, job = v["victim"], v["job"]
    secrets = {
        "the victim's lock secret": str(victim.fence.secret),
        "the upload session URI": SESSION_URI,
        "the job lease's secret": str(job.lease_secret),
        "the alert's claim token": str(v["claim"]),
    }

    # Read everything: no secret is in it.
    dump = _read_everything(attacker)
    read = [x for rows in dump.values() for row in rows for value in row for x in _values(value)]
    text = "\n".join(map(str, read))
    for what, secret in secrets.items():
        assert secret not in text, f"the app role can read {what}"
    for denied in (
        "SELECT session_uri FROM mdame.upload_sessions",
        "SELECT claim_token FROM mdame.alerts",
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            attacker.execute(denied)

    # Every value read, in every credential argument.
    ints = sorted({x for x in read if isinstance(x, int) and not isinstance(x, bool)})
    uuids = sorted({x for x in read if isinstance(x, uuid.UUID)}, key=str)
    assert len(ints) < 1000, len(ints)  # a fresh database: the tries stay cheap
    lock = attacker.execute(
        "SELECT token, holder FROM mdame.system_locks WHERE lock_name = %s", [LOCK]
    ).fetchone()
    assert lock is not None
    lock_token, lock_holder = lock
    assert lock_token == victim.fence.token and lock_token in ints  # the public token is read
    running = [
        (j[0], j[1], j[2])
        for j in attacker.execute(
            "SELECT id, lease_owner, attempt FROM mdame.jobs WHERE state = 'running'"
        )
    ]
    assert running == [(job.id, job.worker_id, job.attempt)]

    # The arguments are sound: with the victim's own secret (in a transaction rolled back) the
    # attacks that matter would go through. So the refusals below are the credential's.
    would = _accepted_with(attacker.info.dsn, _cases(v, victim.fence.secret))
    assert {
        "settle_paid_call",
        "release_paid_call",
        "replace_rotated_credential",
        "resume_upload",
        "apply_param_set",
    } <= would

    before = _fingerprint(owner)
    lock_before = owner.execute("SELECT * FROM mdame.system_locks ORDER BY 1").fetchall()
    tried: set[str] = set()
    accepted: list[str] = []

    def attempt(rpc: str, *args: Any) -> None:
        tried.add(rpc)
        outcome = _refused(attacker, rpc, args)
        if outcome is not None:
            accepted.append(outcome)

    for token in ints:
        # Every fenced write, aimed at the victim's dimension and work.
        for rpc, args in _cases(v, token):
            attempt(rpc, *args)
        attempt("heartbeat_pipeline_lock", LOCK, lock_holder, token, 600)
        attempt("release_pipeline_lock", LOCK, lock_holder, token)
        attempt("start_pipeline_run", uuid.uuid4(), "tech", f"{DAY}|tech", token)
        for job_id, owner_id, n in running:
            attempt("heartbeat_job", job_id, owner_id, n, token, 600)
            attempt("complete_job", job_id, owner_id, n, token, Jsonb({}))
            attempt("fail_job", job_id, owner_id, n, token, "stolen", True, 0)
            attempt(
                "complete_scene_job", job_id, owner_id, n, token, "file:///x.mp4", SHA, False, 60
            )
            attempt(
                "invalidate_scene_cache", SCENE, "file:///x.mp4", "x", job_id, owner_id, n, token
            )
            attempt("reject_scene_job", job_id, owner_id, n, token, Jsonb(["stolen"]))
            attempt("defer_scene_job", job_id, owner_id, n, token, SOON, "stolen")
    for claim in [*uuids, uuid.UUID(int=0)]:
        attempt("mark_alert_delivered", v["alert"], claim)
        attempt("mark_alert_failed", v["alert"], "stolen", claim)
        attempt("renew_alert_claim", v["alert"], claim, 600)
    # The credential-free ones hand out nothing another holder has.
    tried |= {"acquire_pipeline_lock", "claim_job", "claim_undelivered_alerts"}
    tried |= {"claim_scene_job", "reap_expired_jobs"}
    for query in [
        "SELECT * FROM mdame.acquire_pipeline_lock('pipeline:tech', 'attacker', 600)",
        "SELECT * FROM mdame.claim_job('scene_clip', 'attacker:1', 600)",
        "SELECT * FROM mdame.claim_undelivered_alerts(100, 600, 30)",
    ]:
        assert attacker.execute(query).fetchall() == [], query
    held = attacker.execute(
        "SELECT outcome, lease_secret FROM mdame.claim_scene_job('victim-scene', 'attacker:1', 600)"
    ).fetchall()
    assert held == [("held", None)]
    assert attacker.execute("SELECT mdame.reap_expired_jobs(NULL)").fetchone() == (0,)

    assert accepted == [], "\n".join(accepted[:20])
    assert _fingerprint(owner) == before
    assert owner.execute("SELECT * FROM mdame.system_locks ORDER BY 1").fetchall() == lock_before

    # Every RPC the app role may execute was tried, or says why it touches no holder's work.
    executable = {
        r[0]
        for r in owner.execute(
            """SELECT p.proname FROM pg_proc p
                WHERE p.pronamespace = 'mdame'::regnamespace
                  AND has_function_privilege('mdame_app', p.oid, 'EXECUTE')"""
        )
    }
    unclassified = executable - tried - NOT_ANOTHER_HOLDERS_WORK.keys()
    assert not unclassified, f"not tried by the attacker: {sorted(unclassified)}"

    # The holders carry on with their own credentials.
    assert victim.settle_paid_call(v["paid"], "succeeded", 5, {}) == 5
    assert victim.resume_upload(v["publication"]).session_uri == SESSION_URI
    assert state.complete_job(job, {"uri": "file:///clip.mp4"}) is True
    assert state.mark_alert_delivered(v["alert"], v["claim"]) is True
    assert state.release_pipeline_lock(LOCK, victim.fence.holder, victim.fence.secret) is True
