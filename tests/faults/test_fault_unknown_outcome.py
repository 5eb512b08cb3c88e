"""The UNKNOWN outcome: the channel call times out after the request was sent.

The attempt stays 'unknown' (finish_upload with status unknown) and its quota reservation
stays held; no new submission is possible until the outcome is settled (begin_upload answers
'reconcile', record_attempt refuses); the rerun asks the channel first (reconcile_upload) and
only uploads again when the channel says nothing arrived. Either way: one outbox entry, one
successful attempt, quota committed once.
"""

from __future__ import annotations

import pytest
from faultkit import CALLS, LostThenTimeout, PublishedThenTimeout, RecordingOutbox

from mdame_assets.defs.publications.assets import publications
from mdame_assets.runtime import held_lock
from mdame_core.state import ReconcileRequired
from mdame_domain.outbox import list_outbox, outbox_video_id
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
    first = rig.materialize([publications], publisher=channel())

    assert not first.success and "TimeoutError" in _failure(first)
    [pub] = rig.state.list_work_units("publication")
    [account] = rig.state.list_accounts("science")
    assert pub.state == "uploading"
    [attempt] = rig.state.list_attempts(pub.idempotency_key)
    assert attempt.status == "unknown"
    held = rig.state.quota_usage(account.id)
    assert (held.reserved_units, held.committed_units) == (1600, 0)  # kept while unknown
    with held_lock(rig.state, "science", "blind-resubmitter") as fenced:
        # The database refuses a blind resubmission, even from the lock's holder: the recovery
        # point says reconcile first, and the attempt ledger refuses a new attempt.
        again = fenced.begin_upload(
            pub.idempotency_key,
            {**pub.payload},
            1600,
            "RecordingOutbox",
            ["technical"],
            0,
        )
        assert (again.action, again.attempt_id) == ("reconcile", attempt.id)
        with pytest.raises(ReconcileRequired):
            fenced.record_attempt(pub.idempotency_key, "RecordingOutbox", "x", "submitted")
    assert [a.status for a in rig.state.list_attempts(pub.idempotency_key)] == ["unknown"]
    assert len(list_outbox(rig.home / "outbox")) == (1 if arrived else 0)

    CALLS.clear()
    rerun = rig.materialize([publications], publisher=RecordingOutbox())

    assert rerun.success, _failure(rerun)
    methods = [method for method, _ in CALLS]
    assert methods == (["find"] if arrived else ["find", "publish"])  # asked before submitting
    [pub] = rig.state.list_work_units("publication")
    assert pub.state == "published"
    assert pub.result["video_id"] == outbox_video_id(pub.idempotency_key)
    attempts = rig.state.list_attempts(pub.idempotency_key)
    assert [a.status for a in attempts] == (["succeeded"] if arrived else ["failed", "succeeded"])
    assert attempts[0].detail["reconciled_from"] == "unknown"
    spent = rig.state.quota_usage(account.id)
    assert (spent.reserved_units, spent.committed_units) == (0, 1600)  # committed once
    [entry] = list_outbox(rig.home / "outbox")
    assert entry.video_id == pub.result["video_id"]
    assert rig.script().state == "published"
    assert violations(rig.db.app, rig.home, rig.home / "media") == []
