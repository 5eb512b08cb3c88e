"""The UNKNOWN outcome: the answer to the chunk that completes the upload never comes.

The attempt stays 'unknown' and its quota reservation stays held; no new submission is possible
until the outcome is settled (begin_bucket_upload answers 'reconcile', record_attempt refuses).
The rerun takes the upload over and asks the session first: the completed video is taken as
it is; a session that is gone makes it search the channel's uploads for the publication's
marker, and only upload again when nothing arrived. Either way: one outbox entry, one
successful attempt, quota committed once.
"""

from __future__ import annotations

import pytest
from faultkit import CALLS, LostThenTimeout, PublishedThenTimeout, RecordingOutbox

from mdame_assets.defs.publications.assets import publications
from mdame_core.state import ReconcileRequired
from mdame_domain.outbox import list_outbox
from mdame_pipeline.locks import held_lock
from tests.adminkit import as_admin
from tests.chaos.invariants import violations


def _failure(result) -> str:
    return " ".join(str(e.event_specific_data.error) for e in result.all_events if e.is_failure)


@pytest.mark.parametrize(
    ("channel", "arrived"),
    [(PublishedThenTimeout, True), (LostThenTimeout, False)],
    ids=["upload-arrived", "upload-lost"],
)
def test_timeout_after_submit_is_reconciled_before_any_new_submission(rig, channel, arrived):
    CALLS.clear()
    first = rig.materialize([publications], youtube_publisher=channel())

    assert not first.success and "TimeoutError" in _failure(first)
    [pub] = rig.state.list_work_units("publication")
    [account] = rig.state.list_accounts("science")
    assert pub.state == "uploading"
    [attempt] = rig.state.list_attempts(pub.idempotency_key)
    assert attempt.status == "unknown"
    assert rig.state.bucket_usage(account.id)["insert"] == (1, 0)  # kept while unknown
    with held_lock(rig.state, "science", "blind-resubmitter") as fenced:
        # The database refuses a blind resubmission, even from the lock's holder: the recovery
        # point says reconcile first, and the attempt ledger refuses a new attempt.
        again = fenced.begin_bucket_upload(
            pub.idempotency_key, {**pub.payload}, "insert", 1, "RecordingOutbox", ["technical"], 0
        )
        assert (again.action, again.attempt_id) == ("reconcile", attempt.id)
        with pytest.raises(ReconcileRequired):
            as_admin(fenced).record_attempt(
                pub.idempotency_key, "RecordingOutbox", "x", "submitted"
            )
    assert [a.status for a in rig.state.list_attempts(pub.idempotency_key)] == ["unknown"]
    assert len(list_outbox(rig.home / "outbox")) == (1 if arrived else 0)

    CALLS.clear()
    rerun = rig.materialize([publications], youtube_publisher=RecordingOutbox())

    assert rerun.success, _failure(rerun)
    methods = [method for method, _ in CALLS]
    # Asked before submitting: the session first, the channel's uploads once it is gone.
    assert methods[:2] == (["query"] if arrived else ["query", "search"])[:2]
    assert methods.count("initiate") == (0 if arrived else 1)
    [pub] = rig.state.list_work_units("publication")
    assert pub.state == "published"
    attempts = rig.state.list_attempts(pub.idempotency_key)
    assert [a.status for a in attempts] == (["succeeded"] if arrived else ["failed", "succeeded"])
    if not arrived:  # taken over by the rerun (resume_upload), then settled from the search
        assert attempts[0].detail["reconciled_from"] == "submitted"
        assert "resumed_from" in attempts[0].detail
    assert rig.state.bucket_usage(account.id)["insert"] == (0, 1)  # committed once
    [entry] = list_outbox(rig.home / "outbox")
    assert entry.video_id == pub.result["video_id"]
    assert rig.script().state == "published"
    assert violations(rig.db.app, rig.home, rig.home / "media") == []
