"""Exactly-once YouTube publishing against the local fake, with the real google-api-python-client
and real PostgreSQL: for every fault, one video per (script, account), its bytes the render's,
and the quota ledger equal to the channel's counters."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import psycopg
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
    until_published,
)

from fakes.youtube import FakeYouTube
from mdame_core.settings import SettingsError
from mdame_core.state import StateConflict, StateStore
from mdame_domain.channel import NotSent, TransferInterrupted
from mdame_domain.credentials import MasterKey
from mdame_resources.providers.publisher import UploadInFlight, UploadUnsettled, YouTubePublisher
from mdame_resources.providers.youtube_api import UntrustedSessionUri, YouTubeApi
from tests.adminkit import as_admin


def _publish(a: StateStore, pub: YouTubePublisher, s: Setup, logs: list[Any]) -> str | None:
    return publish_once(a, pub, s, logs)


def _assert_exactly_once(
    state: StateStore,
    fake: FakeYouTube,
    s: Setup,
    video_id: str,
    inserts: int = 1,
    unsent: int = 0,
) -> None:
    """One video with the render's bytes, published; the quota ledger equal to the channel's
    counters, which counted `inserts` initiations, plus `unsent` initiations recorded as about
    to be sent that never reached the channel."""
    [channel] = list(fake.snapshot()["channels"])
    videos = fake.videos(channel)
    assert [v["id"] for v in videos] == [video_id]
    assert fake.video_bytes(video_id) == s.video.read_bytes()
    assert videos[0]["sha256"] == s.sha256
    pub = state.get_work_unit("publication", "pu")
    assert pub is not None and pub.state == "published" and pub.result["video_id"] == video_id
    usage = state.bucket_usage(s.account.id)
    counters = fake.counters(channel)
    assert counters["insert"] == inserts
    assert usage.get("insert", (0, 0)) == (0, counters["insert"] + unsent)
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
    ("fault", "inserts"),
    [
        ("lost_response", 1),
        ("reset_mid_chunk", 1),
        ("short_range", 1),
        ("initiate_5xx", 2),  # the refused initiation was counted too
        ("expire_session", 2),  # the lost session's initiation, and the new one's
        ("slow", 1),
    ],
)
def test_every_fault_ends_in_exactly_one_video(
    state, tmp_path, fake, master, fault, inserts
) -> None:
    a, s = _granted(state, tmp_path, master)
    options = {"seconds": 0.5} if fault == "slow" else {}
    fake.faults.push(fault, **options)
    logs: list[Any] = []
    video_id = until_published(a, publisher(fake, tmp_path), s, logs)
    assert not fake.faults.pending(), "the fault never fired"
    _assert_exactly_once(state, fake, s, video_id, inserts)


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
    video_id = until_published(a, pub, s, logs)
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


def test_a_refused_oauth_client_names_the_secrets_file_and_asks_no_reconnect(
    state, tmp_path, fake, master
) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("invalid_client")
    logs: list[Any] = []
    assert _publish(a, publisher(fake, tmp_path), s, logs) is None
    assert not state.account_status(s.account.id).needs_reauth
    [(alert,)] = state._select("SELECT text FROM mdame.alerts WHERE cause = 'provider_refused'")
    assert "invalid_client" in alert and "MDAME_YOUTUBE_CLIENT_SECRETS" in alert
    assert state.get_work_unit("publication", "pu").state == "pending"
    assert fake.videos() == []
    # The client fixed: the next run publishes.
    assert _publish(a, publisher(fake, tmp_path), s, logs) is not None


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
    video_id = until_published(a, pub, s, [])
    _assert_exactly_once(state, fake, s, video_id)


def test_a_publisher_killed_mid_transfer_is_resumed_by_the_next_holder(
    state, owner, fresh_db, tmp_path, fake, master
) -> None:
    a = hold(state, "tech", holder="setup")
    s = ready_to_publish(a, tmp_path, size=400_000)
    store_grant(a, s.account, master)
    state.release_pipeline_lock("pipeline:tech", "setup", a.fence.secret)
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
    with pytest.raises(UploadInFlight, match="until "):  # its lease has not: it waits
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


# The publisher's commit points, each killed right before and right after its commit, with the
# initiations the channel counts and those the ledger counts that never reached it.
CRASH_POINTS = [
    ("begin_bucket_upload", "after", 1, 0),
    # The initiation is recorded as about to be sent, and never is: the ledger keeps it spent
    # (it cannot know), the one initiation the channel did not count.
    ("record_upload_initiation", "after", 1, 1),
    ("open_upload_session", "before", 2, 0),  # a session on the channel, never committed
    ("open_upload_session", "after", 1, 0),  # committed, not one byte sent
    ("finish_upload", "before", 1, 0),  # the video exists, its id not recorded
    ("finish_upload", "after", 1, 0),
    ("record_video_processing", "before", 1, 0),
    ("commit_quota", "after", 1, 0),  # a list call charged, in the middle of processing polls
]


@pytest.mark.parametrize(
    ("rpc", "when", "inserts", "unsent"),
    CRASH_POINTS,
    ids=[f"{r}-{w}" for r, w, _, _ in CRASH_POINTS],
)
def test_a_kill_at_every_commit_point_ends_in_one_video(
    state, owner, fresh_db, tmp_path, fake, master, rpc, when, inserts, unsent
) -> None:
    a = hold(state, "tech", holder="setup")
    s = ready_to_publish(a, tmp_path, size=100_000)
    store_grant(a, s.account, master)
    state.release_pipeline_lock("pipeline:tech", "setup", a.fence.secret)
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
    video_id = until_published(b, pub, s, [])
    _assert_exactly_once(state, fake, s, video_id, inserts, unsent)
    assert state.get_work_unit("publication", "pu").result["processing"] == "succeeded"


def test_demo_wiring_connects_accounts_to_the_fake(state, tmp_path, fake, master) -> None:
    from fakes.youtube import connect_accounts

    a = hold(state, "tech")
    s = ready_to_publish(a, tmp_path)
    connect_accounts(fake, as_admin(state), os.environ["ENV"], state.list_accounts("tech"))
    video_id = _publish(a, publisher(fake, tmp_path), s, [])
    assert video_id is not None and [v["id"] for v in fake.videos()] == [video_id]


# ------------------------------------------------------------------------------------------
# An initiation the channel may have counted keeps its insert quota spent.
# ------------------------------------------------------------------------------------------
def test_an_initiation_left_without_an_answer_keeps_its_insert_spent(
    state, tmp_path, fake, master
) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("initiate_then_drop", answered=False)  # counted, then no answer
    pub = publisher(fake, tmp_path)
    with pytest.raises(TransferInterrupted):
        _publish(a, pub, s, [])
    assert state.get_work_unit("publication", "pu").state == "pending"
    assert [x.status for x in state.list_attempts("pu")] == ["failed"]
    [channel] = list(fake.snapshot()["channels"])
    assert fake.counters(channel)["insert"] == 1
    assert state.bucket_usage(s.account.id)["insert"] == (0, 1)  # not released

    video_id = _publish(a, pub, s, [])  # a new session publishes
    assert video_id is not None
    _assert_exactly_once(state, fake, s, video_id, inserts=2)


def test_a_session_dropped_after_its_initiation_keeps_its_insert_spent(
    state, owner, tmp_path, fake, master
) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("initiate_then_drop")  # answered, then gone at its first chunk
    logs: list[Any] = []
    video_id = _publish(a, publisher(fake, tmp_path), s, logs)
    assert video_id is not None
    assert ("session_gone", {"found": None}) in logs  # searched twice, then a new session
    assert len(fake.sessions()) == 2
    _assert_exactly_once(state, fake, s, video_id, inserts=2)
    attempts = state.list_attempts("pu")
    assert [x.status for x in attempts] == ["failed", "succeeded"]
    keys = {key for key, _ in _ledger(owner, "insert")}
    assert keys == {"pu", f"pu:initiation:{attempts[0].id}"}


def test_a_refusal_that_proves_nothing_was_counted_releases_the_insert(
    state, owner, tmp_path, fake, master
) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.faults.push("quota_exceeded")
    assert _publish(a, publisher(fake, tmp_path), s, []) is None
    [initiation] = fake.initiations()
    assert initiation["counted"] is False
    assert state.bucket_usage(s.account.id).get("insert", (0, 0)) == (0, 0)
    [(counted, reason)] = _charges(owner)
    assert counted is False and "quotaExceeded" in reason


def _ledger(owner: psycopg.Connection, bucket: str) -> list[tuple[str, str]]:
    rows = owner.execute(
        "SELECT quota_key, state FROM mdame.quota_ledger WHERE bucket = %s ORDER BY id", [bucket]
    ).fetchall()
    return [(str(k), str(v)) for k, v in rows]


def _charges(owner: psycopg.Connection) -> list[tuple[bool, str | None]]:
    rows = owner.execute(
        "SELECT counted, reason FROM mdame.upload_charges ORDER BY attempt_id"
    ).fetchall()
    return [(bool(c), r) for c, r in rows]


# ------------------------------------------------------------------------------------------
# A gone session is searched for twice before it counts as nothing.
# ------------------------------------------------------------------------------------------
def test_an_upload_listed_late_is_found_by_the_second_search_not_published_twice(
    state, owner, tmp_path, fake, master, monkeypatch
) -> None:
    """The last chunk's answer is lost and the session expires; the channel lists the new
    video only a while later. One search would settle the upload as not published and upload
    it again: a second video."""
    monkeypatch.setenv("MDAME_GONE_SESSION_RECHECK_S", "3")
    a, s = _granted(state, tmp_path, master)
    pub = publisher(fake, tmp_path, gone_recheck_s=None)  # the setting's delay
    fake.faults.push("late_listing", seconds=3.0)
    fake.faults.push("lost_response")
    with pytest.raises(TransferInterrupted):
        _publish(a, pub, s, [])
    fake.expire_sessions(404)
    logs: list[Any] = []

    with pytest.raises(Exception) as unsettled:  # noqa: PT011 - checked below
        assert _publish(a, pub, s, logs) is None

    assert len(fake.videos()) == 1, "settled as not published after one search: uploaded twice"
    assert isinstance(unsettled.value, UploadUnsettled), unsettled.value
    assert len(fake.sessions()) == 1
    assert state.get_work_unit("publication", "pu").state == "uploading"
    assert [x.status for x in state.list_attempts("pu")] == ["unknown"]
    [(seen, settle_after)] = owner.execute(
        "SELECT gone_seen_at, gone_settle_after FROM mdame.upload_sessions"
    ).fetchall()
    assert (settle_after - seen).total_seconds() == pytest.approx(3.0)
    # The database refuses to settle it as not published before the second search is due.
    with pytest.raises(StateConflict, match="second search"):
        a.reconcile_upload(state.get_work_unit("publication", "pu").id, None, a.db_now())

    while state.db_now() < settle_after:  # the recheck delay; the channel lists it by then
        time.sleep(0.1)
    video_id = _publish(a, pub, s, logs)

    assert video_id is not None
    assert ("session_gone", {"found": video_id}) in logs
    _assert_exactly_once(state, fake, s, video_id)


def test_a_gone_session_not_found_twice_is_uploaded_again_once(
    state, tmp_path, fake, master
) -> None:
    a, s = _granted(state, tmp_path, master)
    pub = publisher(fake, tmp_path, gone_recheck_s=2.0)
    fake.faults.push("expire_session")  # gone at its first chunk: nothing completed
    logs: list[Any] = []
    for _ in range(2):  # the second run searches again too early: still unsettled
        with pytest.raises(Exception) as unsettled:  # noqa: PT011 - checked below
            assert _publish(a, pub, s, logs) is None
        assert len(fake.sessions()) == 1, "settled after one search: a new session at once"
        assert isinstance(unsettled.value, UploadUnsettled), unsettled.value
    assert fake.videos() == []
    time.sleep(2.1)
    video_id = _publish(a, pub, s, logs)
    assert video_id is not None
    assert [st for st, _ in logs if st.startswith("session_gone")] == [
        "session_gone_unsettled", "session_gone_unsettled", "session_gone",
    ]  # fmt: skip
    _assert_exactly_once(state, fake, s, video_id, inserts=2)


# ------------------------------------------------------------------------------------------
# Every request to a session ends before the holder's lease; the token goes nowhere else.
# ------------------------------------------------------------------------------------------
def test_a_stalled_chunk_is_cut_before_the_lease_ends_and_the_next_holder_resumes(
    state, owner, tmp_path, fake, master
) -> None:
    """A chunk stalls longer than the holder's lease (its lock's 4 s plus a 2 s grace): the
    request is cut before the lease ends, so the next holder, which takes the upload over once
    the lease is over, never races it."""
    setup = hold(state, "tech", holder="setup")
    s = ready_to_publish(setup, tmp_path)
    store_grant(setup, s.account, master)
    state.release_pipeline_lock("pipeline:tech", "setup", setup.fence.secret)
    # A per-operation socket timeout (timeout_s) longer than the stall, as in production.
    pub = publisher(fake, tmp_path, upload_grace_s=2, request_margin_s=0.5, timeout_s=30.0)
    fake.faults.push("slow_body", seconds=9.0)
    a = hold(state, "tech", ttl=4, holder="run-a")
    wall, db = time.time(), state.db_now()

    with pytest.raises(Exception) as cut:  # noqa: PT011 - checked below
        _publish(a, pub, s, [])
    stopped = time.time()

    [(lease_end,)] = owner.execute("SELECT lease_expires_at FROM mdame.provider_attempts")
    lease_wall = wall + (lease_end - db).total_seconds()
    assert stopped < lease_wall, f"the chunk ran {stopped - lease_wall:.1f}s past the lease"
    assert isinstance(cut.value, TransferInterrupted) and "cut at its deadline" in str(cut.value)
    b = hold(state, "tech", holder="run-b")
    while state.db_now() <= lease_end:
        time.sleep(0.1)
    logs: list[Any] = []
    video_id = _publish(b, pub, s, logs)
    assert video_id is not None
    assert [f for st, f in logs if st == "resume"]  # the same session, taken over
    assert len(fake.sessions()) == 1
    _assert_exactly_once(state, fake, s, video_id)


def test_a_request_past_its_deadline_is_not_started(tmp_path, fake) -> None:
    api = YouTubeApi(REFRESH_TOKEN, "cid", "cs", root_url=fake.base_url, token_uri=fake.token_uri)
    api.deadline = time.time() - 1
    session = f"{fake.base_url}upload/youtube/v3/videos?uploadType=resumable&upload_id=x"
    with pytest.raises(NotSent, match="deadline"):
        api.query(session, 10)
    with pytest.raises(NotSent, match="deadline"):
        api.initiate({"snippet": {"title": "t"}}, False, 10, "video/mp4")
    assert fake.requests() == []  # not even the token refresh


def test_a_session_uri_on_another_origin_gets_no_token(state, tmp_path, fake, master) -> None:
    """A server answers the initiation with a Location elsewhere: the URI is refused, naming
    where it points, and nothing (no access token above all) is sent there."""
    seen: list[str] = []

    class Record(BaseHTTPRequestHandler):
        def do_PUT(self) -> None:  # noqa: N802 - stdlib name
            seen.append(f"PUT {self.path} {self.headers.get('Authorization')}")
            self.send_response(503)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            return

    other = ThreadingHTTPServer(("127.0.0.1", 0), Record)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        a, s = _granted(state, tmp_path, master)
        port = other.server_address[1]
        fake.faults.push("foreign_location", to=f"http://127.0.0.1:{port}/")
        with pytest.raises(Exception) as refused:  # noqa: PT011 - checked below
            _publish(a, publisher(fake, tmp_path), s, [])
    finally:
        other.shutdown()
        other.server_close()
    assert seen == [], "the access token went to another origin"
    assert isinstance(refused.value, UntrustedSessionUri), refused.value
    assert f"127.0.0.1:{port}" in str(refused.value)
    assert "no access token was sent there" in str(refused.value)
    assert state.get_work_unit("publication", "pu").state == "pending"
    [channel] = list(fake.snapshot()["channels"])  # answered, so counted: kept spent
    assert state.bucket_usage(s.account.id)["insert"] == (0, fake.counters(channel)["insert"])


@pytest.mark.parametrize("root", ["http://youtube.example/", "ftp://127.0.0.1/"])
def test_the_token_goes_to_https_or_a_loopback_root_only(root: str) -> None:
    with pytest.raises(SettingsError, match="must be an https URL"):
        YouTubeApi(REFRESH_TOKEN, "cid", "cs", root_url=root, token_uri="http://127.0.0.1:9/")
