"""The harness's invariants catch what they claim to: each broken state below is reported.

Work is written as a run writes it: under the dimension's pipeline lock (held_lock), released
afterwards."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date

from mdame_domain.idempotency import content_hash
from mdame_domain.media_store import sha256_file
from mdame_domain.outbox import outbox_video_id, publish_to_outbox
from mdame_pipeline.locks import held_lock
from tests.adminkit import as_admin
from tests.chaos.invariants import snapshot, violations

DAY = date(2026, 11, 29)


def _dimension(state) -> int:
    dim = as_admin(state).upsert_dimension("dd", "Dee")
    as_admin(state).upsert_dimension_account("dd", "youtube", "dd-handle", 10_000)
    return dim


def _trend(state, dim: int) -> int:
    payload = {"dimension_id": dim, "partition_date": DAY.isoformat(), "title": "t"}
    with held_lock(state, "dd", "invariants-test") as fenced:
        [trend] = fenced.record_trends("dd", [{"key": "trend-key", "payload": payload}])
    return trend


def test_a_consistent_database_has_no_violations(fresh_db, state, tmp_path) -> None:
    _trend(state, _dimension(state))

    assert violations(fresh_db.app, tmp_path, tmp_path / "media") == []


def test_stuck_units_dead_leases_and_open_reservations_are_reported(
    fresh_db, state, tmp_path
) -> None:
    dim = _dimension(state)
    trend = _trend(state, dim)
    topic = {"dimension_id": dim, "partition_date": DAY.isoformat(), "trend_id": trend}
    with held_lock(state, "dd", "invariants-test") as fenced:
        fenced.upsert_work_unit("topic", "topic-key", topic)  # left 'candidate'
    as_admin(state).enqueue_job("scene_clip", "job-key", {"x": 1})
    state.claim_job("scene_clip", "dead-worker", 60)  # its process is gone
    account = state.list_accounts("dd")[0].id
    as_admin(state).reserve_quota(account, 1600, "quota-key")  # never committed nor released
    state.acquire_pipeline_lock("pipeline:dd", "dead-run", 60)

    found = violations(fresh_db.app, tmp_path, tmp_path / "media")

    assert any("topic" in v and "non-terminal state candidate" in v for v in found), found
    assert any("dead lease of dead-worker" in v for v in found), found
    assert any("quota reservation quota-key left open" in v for v in found), found
    assert any("lock pipeline:dd still held" in v for v in found), found


def test_illegal_or_broken_event_histories_are_reported(fresh_db, state, owner, tmp_path) -> None:
    trend = _trend(state, _dimension(state))
    owner.execute(
        """INSERT INTO mdame.events (subject_kind, subject_id, event, from_state, to_state)
           VALUES ('trend', %s, 'transition', 'scored', 'published')""",
        [trend],
    )

    found = violations(fresh_db.app, tmp_path, tmp_path / "media")

    assert any("illegal transition in events: trend" in v for v in found), found
    assert any(f"trend {trend} is scored but its events end at published" in v for v in found)


def test_unpublished_outbox_entries_and_half_written_ones_are_reported(
    fresh_db, state, tmp_path
) -> None:
    _dimension(state)
    entry = tmp_path / "outbox" / "dd" / "AAAAAAAAAAA"
    entry.mkdir(parents=True)
    (entry / "metadata.json").write_text(json.dumps({"video_id": entry.name}))
    (tmp_path / "outbox" / "dd" / ".tmp-BBB-x").mkdir()

    found = violations(fresh_db.app, tmp_path, tmp_path / "media")

    assert any("AAAAAAAAAAA belongs to no published publication" in v for v in found), found
    assert any("half-written outbox entries" in v for v in found), found


def test_an_end_state_that_differs_from_the_clean_run_is_reported(
    fresh_db, state, tmp_path
) -> None:
    _trend(state, _dimension(state))
    media = tmp_path / "media"
    clean = snapshot(fresh_db.app, tmp_path, media)
    assert violations(fresh_db.app, tmp_path, media, clean) == []

    other = replace(clean, units={"trend": {"trend-key": "failed"}, "topic": {"t": "approved"}})
    found = violations(fresh_db.app, tmp_path, media, other)

    assert any("trend trend-key is scored, clean run has failed" in v for v in found), found
    assert any("topic t is absent, clean run has approved" in v for v in found), found


def _publication(state, dim: int, tmp_path) -> tuple[int, str]:
    """A publication of a render, published to the outbox with the render's bytes, as the
    publications stage leaves it; returns its id and the video's sha256."""
    video = tmp_path / "render.mp4"
    video.write_bytes(b"the approved render's bytes")
    sha = sha256_file(video)
    [account] = state.list_accounts("dd")
    base = {"dimension_id": dim, "partition_date": DAY.isoformat()}
    with held_lock(state, "dd", "invariants-test") as fenced:
        topic = fenced.upsert_work_unit("topic", "topic-key", {**base, "title": "t"})
        script = fenced.upsert_work_unit("script", "script-key", {**base, "topic_id": topic})
        render = fenced.upsert_work_unit(
            "render", "render-key", {"script_id": script, "sha256": sha, "uri": "x"}
        )
        pub = fenced.upsert_work_unit(
            "publication",
            "pub-key",
            {
                "script_id": script,
                "render_id": render,
                "account_id": account.id,
                "content_sha256": sha,
            },
        )
        assert as_admin(fenced).reserve_quota(account.id, 1600, "pub-key") is not None
        fenced.transition("publication", pub, "pending", "uploading")
        attempt = as_admin(fenced).record_attempt("pub-key", "outbox", sha, "submitted")
        video_id = outbox_video_id("a session of pub-key")
        publish_to_outbox(
            tmp_path / "outbox", "dd", video_id, video, {"published_at": "2026-11-30"}
        )
        fenced.finish_upload(attempt, "succeeded", video_id)
    return pub, sha


def test_a_consistent_publication_has_no_byte_ledger_or_lease_violation(
    fresh_db, state, tmp_path
) -> None:
    _publication(state, _dimension(state), tmp_path)

    found = violations(fresh_db.app, tmp_path, tmp_path / "media")

    for words in ("content", "other bytes", "charged to", "no lock lease", "left open"):
        assert not any(words in v for v in found), found


def test_published_bytes_other_than_the_approved_ones_are_reported(
    fresh_db, state, owner, tmp_path
) -> None:
    pub, _ = _publication(state, _dimension(state), tmp_path)
    # The channel holds other bytes than those the publication names.
    [video] = (tmp_path / "outbox").glob("dd/*/video.mp4")
    video.write_bytes(b"something else")
    # And another publication's content is not its render's.
    other = content_hash("not the render")
    owner.execute("UPDATE mdame.publications SET content_sha256 = %s WHERE id = %s", [other, pub])

    found = violations(fresh_db.app, tmp_path, tmp_path / "media")

    assert any(f"publication {pub} names content {other[:20]}" in v for v in found), found
    assert any(f"publication {pub}: the channel's video" in v for v in found), found


def test_quota_charged_to_another_day_and_attempts_without_a_lease_are_reported(
    fresh_db, state, owner, tmp_path
) -> None:
    _publication(state, _dimension(state), tmp_path)
    # Charged to the partition's day (a day before the real one), as before quota days.
    owner.execute("UPDATE mdame.quota_ledger SET day = day - 1")
    owner.execute("UPDATE mdame.provider_attempts SET lock_token = NULL")

    found = violations(fresh_db.app, tmp_path, tmp_path / "media")

    assert any("quota pub-key is charged to" in v for v in found), found
    assert any("for pub-key has no lock lease" in v for v in found), found
