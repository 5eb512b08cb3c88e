"""Exactly-once Instagram Reels through the publisher's protocol, against the local Instagram
server and real PostgreSQL: one reel per (script, account) with the render's bytes, whatever
fails in between, and the account's long-lived token refreshed and kept sealed."""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import replace
from datetime import date
from pathlib import Path
from typing import Any

import pytest
from test_fencing import expire, hold
from youtube_kit import (
    META,
    REFRESH_TOKEN,
    Setup,
    publish_once,
    ready_to_publish,
    store_grant,
    until_published,
)

from fakes import instagram
from fakes.instagram import FakeInstagram
from mdame_core.state import StateStore
from mdame_domain.analytics import VideoCounters
from mdame_domain.channel import TransferInterrupted
from mdame_domain.credentials import MasterKey
from mdame_domain.tiktok import MIB
from mdame_resources.providers.publisher import InstagramPublisher
from mdame_resources.providers.publisher.grants import account_grant, store_rotated_grant
from mdame_resources.providers.publisher.instagram import TOKEN_REFRESH_AFTER_S
from tests.adminkit import as_admin


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeInstagram]:
    with instagram.running(tmp_path / "instagram") as fake:
        fake.set_processing_delay(0)
        fake.add_account("tech", REFRESH_TOKEN)
        yield fake


def _publisher(server: FakeInstagram, **overrides: Any) -> InstagramPublisher:
    config: dict[str, Any] = {
        "graph_url": server.base_url,
        "chunk_size": 5 * MIB,
        "timeout_s": 10.0,
        "processing_polls": 3,
        "processing_poll_s": 0.01,
        "upload_grace_s": 0,
        "gone_recheck_s": 0.001,
    }
    return InstagramPublisher(**{**config, **overrides})


def _granted(state: StateStore, tmp_path: Path, master: MasterKey, size: int) -> tuple:
    """The tech lock held, a render of `size` bytes ready to publish to the dimension's
    Instagram account, and that account's grant stored."""
    a = hold(state, "tech")
    youtube = ready_to_publish(a, tmp_path, size=size)
    as_admin(a).upsert_dimension_account("tech", "instagram", "tech.reels", 100)
    [account] = [x for x in a.list_accounts("tech") if x.platform == "instagram"]
    store_grant(a, account, master)
    s = Setup(account, {**youtube.payload, "account_id": account.id}, youtube.video, youtube.sha256)
    return a, s


def _assert_published_once(
    state: StateStore, server: FakeInstagram, s: Setup, media_id: str
) -> None:
    assert [m["id"] for m in server.media()] == [media_id]
    assert server.media_bytes(media_id) == s.video.read_bytes()
    pub = state.get_work_unit("publication", "pu")
    assert pub is not None and pub.state == "published" and pub.result["video_id"] == media_id
    assert pub.result["processing"] == "succeeded"
    # The ledger counts published reels, as the 24-hour publishing limit does.
    assert state.bucket_usage(s.account.id).get("insert", (0, 0)) == (0, 1)


def test_a_reel_in_chunks_is_published_once_with_its_marker_first(
    state, tmp_path, server, master
) -> None:
    a, s = _granted(state, tmp_path, master, size=12 * MIB)
    logs: list[Any] = []
    pub = _publisher(server)
    media_id = publish_once(a, pub, s, logs)
    assert media_id is not None
    _assert_published_once(state, server, s, media_id)
    [media] = server.media()
    assert media["caption"].startswith("[mdame:")
    uploads = [r for r in server.requests() if r.startswith("POST /ig-api-upload/")]
    assert len(uploads) == 3  # 5 + 5 + 2 MiB
    [container] = server.containers().values()
    assert container["params"]["media_type"] == "REELS"
    assert publish_once(a, pub, s, logs) == media_id  # published: a no-op
    assert len(server.containers()) == 1


@pytest.mark.parametrize(
    ("fault", "options"),
    [
        ("drop_upload", {"stored": True}),  # the file is whole, the answer lost
        ("drop_upload", {"stored": False}),  # the last request's bytes never arrived
        ("interrupt_upload", {}),  # half a request's body arrived, then a reset
        ("upload_5xx", {}),
        ("status_5xx", {}),
        ("publish_5xx", {}),  # not published: asked again
        ("publish_5xx", {"published": True}),  # published, the answer a 500
        ("lost_publish", {}),  # published, the answer never sent
        ("throttle", {}),  # a graph call throttled (code 4)
        ("create_5xx", {}),  # no container made
    ],
)
def test_every_fault_ends_in_exactly_one_reel(
    state, tmp_path, server, master, fault, options
) -> None:
    a, s = _granted(state, tmp_path, master, size=12 * MIB)
    server.faults.push(fault, **options)
    logs: list[Any] = []
    media_id = until_published(a, _publisher(server), s, logs)
    assert not server.faults.pending(), "the fault never fired"
    _assert_published_once(state, server, s, media_id)


@pytest.mark.parametrize("fault", ["container_error", "container_expired"])
def test_a_container_that_fails_processing_is_settled_and_published_again_once(
    state, tmp_path, server, master, fault
) -> None:
    a, s = _granted(state, tmp_path, master, size=2 * MIB)
    server.faults.push(fault)
    logs: list[Any] = []
    media_id = until_published(a, _publisher(server), s, logs)
    _assert_published_once(state, server, s, media_id)
    codes = sorted(c["status_code"] for c in server.containers().values())
    assert codes == sorted(["ERROR" if fault == "container_error" else "EXPIRED", "PUBLISHED"])


def test_a_stalled_upload_is_cut_before_the_lease_ends_and_the_next_holder_resumes(
    state, owner, tmp_path, server, master
) -> None:
    """The upload's answer trickles in a line at a time, so no read waits long but the whole
    answer outlasts the holder's lease (its lock's 2 s plus a 1 s grace): the request is cut
    before the lease ends, so the next holder, which takes the upload over once the lease is
    over, never races it."""
    setup = hold(state, "tech", holder="setup")
    youtube = ready_to_publish(setup, tmp_path, size=2000)
    as_admin(setup).upsert_dimension_account("tech", "instagram", "tech.reels", 100)
    [account] = [x for x in setup.list_accounts("tech") if x.platform == "instagram"]
    store_grant(setup, account, master)
    expire(owner, "tech")
    s = Setup(account, {**youtube.payload, "account_id": account.id}, youtube.video, youtube.sha256)
    # A per-operation timeout (timeout_s) longer than the whole stall, as in production.
    pub = _publisher(server, upload_grace_s=1, request_margin_s=0.25, timeout_s=30.0)
    server.faults.push("slow_answer", seconds=0.5, lines=12)
    a = hold(state, "tech", ttl=2, holder="run-a")
    wall, db = time.time(), state.db_now()

    with pytest.raises(TransferInterrupted, match="cut at its deadline"):
        publish_once(a, pub, s, [])
    stopped = time.time()

    [(lease_end,)] = owner.execute("SELECT lease_expires_at FROM mdame.provider_attempts")
    lease_wall = wall + (lease_end - db).total_seconds()
    assert stopped < lease_wall, f"the upload ran {stopped - lease_wall:.1f}s past the lease"
    b = hold(state, "tech", holder="run-b")
    while state.db_now() <= lease_end:
        time.sleep(0.1)
    media_id = publish_once(b, pub, s, [])
    assert media_id is not None
    assert len(server.containers()) == 1  # the same container, taken over
    _assert_published_once(state, server, s, media_id)


def test_the_publishing_limit_pauses_the_account(state, tmp_path, server, master) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    server.set_publish_limit(0)
    logs: list[Any] = []
    assert publish_once(a, _publisher(server), s, logs) is None
    status = state.account_status(s.account.id)
    assert status.pause_reason == "content_publishing_limit" and status.paused_until
    assert state.get_work_unit("publication", "pu").state == "pending"
    assert server.media() == []


def test_a_revoked_token_asks_for_a_reconnect(state, tmp_path, server, master) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    server.revoke(REFRESH_TOKEN)
    logs: list[Any] = []
    assert publish_once(a, _publisher(server), s, logs) is None
    assert state.account_status(s.account.id).needs_reauth
    assert server.media() == [] and server.containers() == {}


def test_the_token_is_dated_on_first_use_and_refreshed_a_week_on(
    state, tmp_path, server, master
) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    pub = _publisher(server)
    pub.channel(a, s.account, "tech")  # a fresh connect: its age unknown
    first = account_grant(a, s.account, "tech", "")
    assert first.refresh_token == REFRESH_TOKEN and first.issued_at is not None
    pub.channel(a, s.account, "tech")  # days young: not refreshed
    assert account_grant(a, s.account, "tech", "").refresh_token == REFRESH_TOKEN
    week_old = time.time() - TOKEN_REFRESH_AFTER_S - 60
    assert store_rotated_grant(a, s.account, first, REFRESH_TOKEN, "", week_old)
    pub.channel(a, s.account, "tech")
    fresh = account_grant(a, s.account, "tech", "")
    assert fresh.refresh_token != REFRESH_TOKEN and fresh.issued_at > week_old
    # The old token still works until it lapses (Meta's rule), the new one is the one used.
    media_id = publish_once(a, pub, s, [])
    assert media_id is not None
    _assert_published_once(state, server, s, media_id)


def test_a_reels_insights_are_read_and_metered(state, tmp_path, server, master) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    pub = _publisher(server)
    media_id = publish_once(a, pub, s, [])
    assert media_id is not None
    server.set_insights(media_id, views=300, likes=12, comments=4)
    day = date(2026, 11, 30)
    before = state.bucket_usage(s.account.id).get("units", (0, 0))[1]
    counters = pub.video_statistics(a, s.account, "tech", {media_id: day}, day)
    assert counters == {media_id: VideoCounters(300, 12, 4)}
    assert state.bucket_usage(s.account.id)["units"][1] == before + 1


def test_the_dimensions_instagram_settings_reach_the_container(
    state, tmp_path, server, master
) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    meta = replace(META, post_settings=(("share_to_feed", False),))
    media_id = until_published(a, _publisher(server), s, [], meta=meta)
    [container] = server.containers().values()
    assert container["params"]["share_to_feed"] == "false"
    _assert_published_once(state, server, s, media_id)
