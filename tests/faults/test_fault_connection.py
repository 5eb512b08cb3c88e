"""The connection dies mid-RPC, or a statement times out: the client raises, and what happened
is decided by re-reading the database, never by the client's error.

Three faults, each inside the publishing stage (where a wrong guess would mean a second video):
- the reply to finish_upload (the upload's outcome commit: attempt succeeded, publication
  published, quota committed, in one statement) is lost (a proxy lets the statement commit, then
  cuts the connection): the call raised, yet the upload is recorded as done; the rerun sees
  that and does not submit again;
- pg_terminate_backend kills begin_bucket_upload (the recovery point before the upload: publication,
  quota reservation, attempt 'submitted', publication 'uploading') while it waits on the
  account row: nothing of it committed, so the rerun begins afresh and uploads once;
- a statement timeout cancels begin_bucket_upload while it waits there: likewise nothing
  committed, so the rerun reserves (once) and publishes.
All three end in the same state as an undisturbed run.
"""

from __future__ import annotations

from faultkit import (
    CALLS,
    RecordingOutbox,
    ReplyDropper,
    ShortTimeoutState,
    owner_transaction,
    terminate_when_blocked,
)

from mdame_assets.defs.publications.assets import publications
from mdame_domain.idempotency import idempotency_key
from mdame_domain.outbox import list_outbox
from mdame_resources.state import StateStoreResource
from tests.chaos.invariants import violations


def _errors(result) -> str:
    return " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)


def _publication_key(rig) -> str:
    [account] = rig.state.list_accounts("science")
    return idempotency_key(
        rig.script().idempotency_key, "publication", account.platform, account.handle
    )


def _assert_converged(rig, attempts: list[str]) -> None:
    """The end state of an undisturbed run (plus any attempt the fault legitimately left)."""
    [pub] = rig.state.list_work_units("publication")
    [account] = rig.state.list_accounts("science")
    assert rig.script().state == "published"
    assert pub.state == "published"
    assert [a.status for a in rig.state.list_attempts(pub.idempotency_key)] == attempts
    assert rig.state.bucket_usage(account.id)["insert"] == (0, 1)
    assert [e.video_id for e in list_outbox(rig.home / "outbox")] == [pub.result["video_id"]]
    assert violations(rig.db.app, rig.home, rig.home / "media") == []


def _rerun(rig) -> None:
    CALLS.clear()
    rerun = rig.materialize([publications], youtube_publisher=RecordingOutbox())
    assert rerun.success, _errors(rerun)


def test_commit_whose_reply_is_lost_is_seen_as_done_by_the_rerun(rig):
    proxy = ReplyDropper(rig.db.app)
    try:
        proxy.arm("finish_upload")
        first = rig.materialize(
            [publications], state=StateStoreResource(database_url=proxy.url(rig.db.app))
        )
    finally:
        proxy.close()

    assert proxy.fired.is_set()
    assert not first.success
    assert "connection" in _errors(first).lower()
    # The client saw a lost connection; the database says the upload succeeded, and the
    # publication and its quota moved with it.
    [pub] = rig.state.list_work_units("publication")
    [account] = rig.state.list_accounts("science")
    assert pub.state == "published"
    assert [a.status for a in rig.state.list_attempts(pub.idempotency_key)] == ["succeeded"]
    assert rig.state.bucket_usage(account.id)["insert"] == (0, 1)
    assert rig.script().state == "publishing"  # the step died before finishing the script

    _rerun(rig)

    assert "initiate" not in [method for method, _ in CALLS]  # done, so not submitted again
    _assert_converged(rig, ["succeeded"])


def test_rpc_killed_by_pg_terminate_backend_did_not_happen_and_is_redone(rig):
    key = _publication_key(rig)
    [account] = rig.state.list_accounts("science")
    with owner_transaction(rig.db.owner) as owner:
        # The account row serialises quota reservations: begin_bucket_upload waits on it there,
        # after creating the publication in the same (uncommitted) statement.
        owner.execute(
            "SELECT 1 FROM mdame.dimension_accounts WHERE id = %s FOR NO KEY UPDATE", (account.id,)
        )
        killer = terminate_when_blocked(rig.su_url, rig.db.name, "begin_bucket_upload")
        first = rig.materialize([publications], youtube_publisher=RecordingOutbox())
        killer.join(30)

    assert killer.killed
    assert not first.success
    assert rig.script().state == "publishing"  # committed before the kill
    # The killed call did not commit, any of it: no publication, no reservation, no attempt.
    assert rig.state.list_work_units("publication") == []
    assert rig.state.list_attempts(key) == []
    assert rig.state.bucket_usage(account.id) == {}
    assert list_outbox(rig.home / "outbox") == []

    _rerun(rig)

    # Nothing was in flight, so nothing to ask: one session, its bytes, no status query.
    methods = [method for method, _ in CALLS]
    assert methods[0] == "initiate" and set(methods) == {"initiate", "send_chunk"}
    _assert_converged(rig, ["succeeded"])


def test_rpc_cancelled_by_a_statement_timeout_did_not_happen_and_is_redone(rig):
    [account] = rig.state.list_accounts("science")
    impatient = ShortTimeoutState(database_url=rig.db.app, statement_timeout_ms=500)
    with owner_transaction(rig.db.owner) as owner:
        # The account row serialises quota reservations: begin_bucket_upload waits, times out.
        owner.execute(
            "SELECT 1 FROM mdame.dimension_accounts WHERE id = %s FOR NO KEY UPDATE", (account.id,)
        )
        first = rig.materialize(
            [publications], youtube_publisher=RecordingOutbox(), state=impatient
        )

    assert not first.success
    assert "statement timeout" in _errors(first)
    assert "begin_bucket_upload" in _errors(first)
    assert rig.script().state == "publishing"
    # Cancelled whole: no publication, nothing reserved, nothing submitted.
    assert rig.state.list_work_units("publication") == []
    assert rig.state.list_attempts(_publication_key(rig)) == []
    assert rig.state.bucket_usage(account.id) == {}
    assert list_outbox(rig.home / "outbox") == []

    _rerun(rig)

    _assert_converged(rig, ["succeeded"])
