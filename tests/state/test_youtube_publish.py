"""Exactly-once YouTube publishing against the local fake, with the real google-api-python-client
and real PostgreSQL: for every fault, one video per (script, account), its bytes the render's,
and the quota ledger equal to the channel's counters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from test_fencing import expire, hold
from youtube_kit import (
    META,
    REFRESH_TOKEN,
    Setup,
    publish_once,
    publisher,
    ready_to_publish,
    store_grant,
)

from fakes.youtube import FakeYouTube
from mdame_core.state import LeaseLost, StateStore
from mdame_domain.credentials import MasterKey
from mdame_resources.providers.publisher import YouTubePublisher
from tests.adminkit import as_admin


def _publish(a: StateStore, pub: YouTubePublisher, s: Setup, logs: list[Any]) -> str | None:
    return publish_once(a, pub, s, logs)


def _until_published(a: StateStore, pub: YouTubePublisher, s: Setup, logs: list[Any]) -> str:
    """Runs the publication as successive runs would, until it is published."""
    for _ in range(6):
        try:
            video_id = _publish(a, pub, s, logs)
        except Exception as exc:  # an interrupted run: the next one resumes
            logs.append(("run_failed", {"error": type(exc).__name__}))
            continue
        if video_id is not None:
            return video_id
    raise AssertionError(f"never published: {logs}")


def _assert_exactly_once(state: StateStore, fake: FakeYouTube, s: Setup, video_id: str) -> None:
    [channel] = list(fake.snapshot()["channels"])
    videos = fake.videos(channel)
    assert [v["id"] for v in videos] == [video_id]
    assert fake.video_bytes(video_id) == s.video.read_bytes()
    assert videos[0]["sha256"] == s.sha256
    pub = state.get_work_unit("publication", "pu")
    assert pub is not None and pub.state == "published" and pub.result["video_id"] == video_id
    usage = state.bucket_usage(s.account.id)
    counters = fake.counters(channel)
    assert usage.get("insert", (0, 0)) == (0, counters["insert"]) == (0, 1)
    assert usage.get("units", (0, 0)) == (0, counters["units"])


def _granted(state: StateStore, tmp_path: Path, master: MasterKey) -> tuple[StateStore, Setup]:
    """The tech lock held, a render ready to publish, and its account's grant stored."""
    a = hold(state, "tech")
    s = ready_to_publish(a, tmp_path)
    store_grant(a, s.account, master)
    return a, s


def test_a_clean_upload_publishes_once(state, tmp_path, fake, master) -> None:
    a, s = _granted(state, tmp_path, master)
    logs: list[Any] = []
    pub = publisher(fake, tmp_path)
    video_id = _publish(a, pub, s, logs)
    assert video_id is not None
    _assert_exactly_once(state, fake, s, video_id)
    assert any(status == "upload_progress" for status, _ in logs)
    sessions = fake.sessions()
    assert len(sessions) == 1  # one session, committed before its first byte
    # Publishing again is a no-op: the publication is published.
    assert _publish(a, pub, s, logs) == video_id
    _assert_exactly_once(state, fake, s, video_id)
    assert state.get_work_unit("publication", "pu").result["processing"] == "succeeded"


@pytest.mark.parametrize(
    "fault",
    [
        "lost_response",
        "reset_mid_chunk",
        "short_range",
        "initiate_5xx",
        "expire_session",
        "slow",
    ],
)
def test_every_fault_ends_in_exactly_one_video(state, tmp_path, fake, master, fault) -> None:
    a, s = _granted(state, tmp_path, master)
    options = {"seconds": 0.5} if fault == "slow" else {}
    fake.faults.push(fault, **options)
    logs: list[Any] = []
    video_id = _until_published(a, publisher(fake, tmp_path), s, logs)
    assert not fake.faults.pending(), "the fault never fired"
    _assert_exactly_once(state, fake, s, video_id)


def test_a_lost_answer_with_the_session_gone_is_found_in_the_uploads_playlist(
    state, tmp_path, fake, master
) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("lost_response")
    logs: list[Any] = []
    pub = publisher(fake, tmp_path)
    with pytest.raises(Exception):  # noqa: B017 - the answer never came
        _publish(a, pub, s, logs)
    fake.expire_sessions(410)
    video_id = _until_published(a, pub, s, logs)
    assert ("session_gone", {"found": video_id}) in logs
    _assert_exactly_once(state, fake, s, video_id)


def test_quota_exceeded_releases_and_skips_the_account_for_the_day(
    state, tmp_path, fake, master
) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("quota_exceeded")
    logs: list[Any] = []
    pub = publisher(fake, tmp_path)
    assert _publish(a, pub, s, logs) is None
    status = state.account_status(s.account.id)
    assert status.pause_reason == "quotaExceeded" and status.paused_until is not None
    assert state.bucket_usage(s.account.id).get("insert", (0, 0)) == (0, 0)
    assert state.get_work_unit("publication", "pu").state == "pending"
    assert _publish(a, pub, s, logs) is None  # skipped: nothing reserved, nothing sent
    assert fake.videos() == []
    assert ("account_skipped", {"account_id": s.account.id}) in logs


def test_upload_limit_exceeded_skips_the_account_for_24_hours(
    state, tmp_path, fake, master
) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("upload_limit_exceeded")
    assert _publish(a, publisher(fake, tmp_path), s, []) is None
    status = state.account_status(s.account.id)
    assert status.pause_reason == "uploadLimitExceeded"
    hours = (status.paused_until - state.db_now()).total_seconds() / 3600
    assert 23.9 < hours <= 24


def test_invalid_grant_marks_the_account_and_alerts(state, tmp_path, fake, master) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("invalid_grant")
    logs: list[Any] = []
    assert _publish(a, publisher(fake, tmp_path), s, logs) is None
    assert state.account_status(s.account.id).needs_reauth
    events = state.list_events("account", s.account.id)
    assert any(e.event == "alert" and e.detail["alert"] == "needs_reauth" for e in events)
    assert state.get_work_unit("publication", "pu").state == "pending"
    assert fake.videos() == []
    text = repr(logs) + repr([e.detail for e in events])
    assert REFRESH_TOKEN not in text and master.encoded() not in text


def test_failed_processing_is_recorded_and_alerted(state, tmp_path, fake, master) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("processing_failed")
    video_id = _publish(a, publisher(fake, tmp_path), s, [])
    assert video_id is not None
    pub = state.get_work_unit("publication", "pu")
    assert pub.result["processing"] == "failed"
    assert any(e.event == "alert" for e in state.list_events("publication", pub.id))


def test_the_fake_keeps_its_state_across_a_restart(state, tmp_path, fake, master) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("reset_mid_chunk")
    pub = publisher(fake, tmp_path)
    with pytest.raises(Exception):  # noqa: B017 - the connection was reset
        _publish(a, pub, s, [])
    fake.restart()
    video_id = _until_published(a, pub, s, [])
    _assert_exactly_once(state, fake, s, video_id)


def test_a_publisher_killed_mid_transfer_is_resumed_by_the_next_holder(
    state, owner, fresh_db, tmp_path, fake, master
) -> None:
    a = hold(state, "tech", holder="setup")
    s = ready_to_publish(a, tmp_path, size=400_000)
    store_grant(a, s.account, master)
    state.release_pipeline_lock("pipeline:tech", "setup", a.fence.token)
    pub = publisher(fake, tmp_path)
    spec = {
        "db": fresh_db.app,
        "account_id": s.account.id,
        "payload": s.payload,
        "video": str(s.video),
        "kill_after": 3,
        "publisher": pub.model_dump(),
        "meta": {"title": META.title, "description": META.description, "tags": list(META.tags)},
    }
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("youtube_child.py")), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    [session] = fake.sessions().values()
    assert 0 < session["received"] < session["total"] and session["video_id"] is None
    assert state.get_work_unit("publication", "pu").state == "uploading"

    expire(owner, "tech")  # the dead holder's lock runs out
    b = hold(state, "tech", holder="next")
    with pytest.raises(LeaseLost):  # its submission's lease has not: no takeover yet
        _publish(b, pub, s, [])
    owner.execute(
        "UPDATE mdame.provider_attempts SET lease_expires_at = now() - interval '1 second'"
    )
    logs: list[Any] = []
    video_id = _publish(b, pub, s, logs)
    assert video_id is not None
    resumed = [f for status, f in logs if status == "resume"]
    assert resumed and resumed[0]["from_byte"] == session["received"]
    assert len(fake.sessions()) == 1  # the same session, resumed: no second one
    _assert_exactly_once(state, fake, s, video_id)


# The publisher's commit points, each killed right before and right after its commit.
CRASH_POINTS = [
    ("begin_bucket_upload", "after"),
    ("open_upload_session", "before"),  # a session exists on the channel, never committed
    ("open_upload_session", "after"),  # committed, not one byte sent
    ("finish_upload", "before"),  # the video exists, its id not recorded
    ("finish_upload", "after"),
    ("record_video_processing", "before"),
    ("commit_quota", "after"),  # a list call charged, in the middle of processing polls
]


@pytest.mark.parametrize(("rpc", "when"), CRASH_POINTS, ids=[f"{r}-{w}" for r, w in CRASH_POINTS])
def test_a_kill_at_every_commit_point_ends_in_one_video(
    state, owner, fresh_db, tmp_path, fake, master, rpc, when
) -> None:
    a = hold(state, "tech", holder="setup")
    s = ready_to_publish(a, tmp_path, size=100_000)
    store_grant(a, s.account, master)
    state.release_pipeline_lock("pipeline:tech", "setup", a.fence.token)
    pub = publisher(fake, tmp_path)
    spec = {
        "db": fresh_db.app,
        "account_id": s.account.id,
        "payload": s.payload,
        "video": str(s.video),
        "crash": {"rpc": rpc, "when": when},
        "publisher": pub.model_dump(),
        "meta": {"title": META.title, "description": META.description, "tags": list(META.tags)},
    }
    child = subprocess.run(
        [sys.executable, str(Path(__file__).with_name("youtube_child.py")), json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
    )
    assert child.returncode == -signal.SIGKILL, child.stdout + child.stderr
    expire(owner, "tech")
    owner.execute(
        "UPDATE mdame.provider_attempts SET lease_expires_at = now() - interval '1 second'"
    )
    b = hold(state, "tech", holder="next")
    video_id = _until_published(b, pub, s, [])
    _assert_exactly_once(state, fake, s, video_id)
    assert state.get_work_unit("publication", "pu").result["processing"] == "succeeded"


def test_demo_wiring_connects_accounts_to_the_fake(state, tmp_path, fake, master) -> None:
    from fakes.youtube import connect_accounts

    a = hold(state, "tech")
    s = ready_to_publish(a, tmp_path)
    connect_accounts(fake, as_admin(state), os.environ["ENV"], state.list_accounts("tech"))
    video_id = _publish(a, publisher(fake, tmp_path), s, [])
    assert video_id is not None and [v["id"] for v in fake.videos()] == [video_id]
