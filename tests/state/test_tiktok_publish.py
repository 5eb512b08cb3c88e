"""Exactly-once TikTok posting through the publisher's protocol, against the local TikTok server
and real PostgreSQL: one post per (script, account) with the render's bytes, whatever fails in
between, and the creator's rotating refresh token kept sealed in the database."""

from __future__ import annotations

import base64
import os
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

from fakes import tiktok
from fakes.tiktok import FakeTikTok
from mdame_core.state import StateStore
from mdame_domain.analytics import VideoCounters
from mdame_domain.channel import ChannelError, TransferInterrupted
from mdame_domain.credentials import (
    Envelope,
    MasterKey,
    associated_data,
    open_grant,
    rewrap,
)
from mdame_domain.tiktok import MIB
from mdame_resources.providers.publisher import TikTokPublisher
from mdame_resources.providers.publisher.grants import account_grant
from tests.adminkit import as_admin


@pytest.fixture
def server(tmp_path: Path) -> Iterator[FakeTikTok]:
    with tiktok.running(tmp_path / "tiktok") as fake:
        fake.set_limits(processing_delay=0)
        fake.add_creator("tech", REFRESH_TOKEN)
        yield fake


def _publisher(server: FakeTikTok, **overrides: Any) -> TikTokPublisher:
    config: dict[str, Any] = {
        "client_key": "ck",
        "client_secret": "cs-not-secret",
        "base_url": server.base_url,
        "chunk_size": 5 * MIB,
        "timeout_s": 10.0,
        "processing_polls": 2,
        "processing_poll_s": 0.01,
        "upload_grace_s": 0,
        "gone_recheck_s": 0.001,
    }
    return TikTokPublisher(**{**config, **overrides})


def _granted(state: StateStore, tmp_path: Path, master: MasterKey, size: int) -> tuple:
    """The tech lock held, a render of `size` bytes ready to publish to the dimension's TikTok
    account, and that account's grant stored."""
    a = hold(state, "tech")
    youtube = ready_to_publish(a, tmp_path, size=size)
    as_admin(a).upsert_dimension_account("tech", "tiktok", "@tech-tt", 10_000)
    [account] = [x for x in a.list_accounts("tech") if x.platform == "tiktok"]
    store_grant(a, account, master)
    s = Setup(account, {**youtube.payload, "account_id": account.id}, youtube.video, youtube.sha256)
    return a, s


def _assert_posted_once(state: StateStore, server: FakeTikTok, s: Setup, video_id: str) -> None:
    done = [p for p in server.publishes() if p["status"] == "PUBLISH_COMPLETE"]
    assert [p["publish_id"] for p in done] == [video_id]
    assert server.video_bytes(video_id) == s.video.read_bytes()
    pub = state.get_work_unit("publication", "pu")
    assert pub is not None and pub.state == "published" and pub.result["video_id"] == video_id
    assert pub.result["processing"] == "succeeded"
    # The ledger counts every initialized post, as the creator's daily cap does.
    assert state.bucket_usage(s.account.id).get("insert", (0, 0)) == (0, len(server.publishes()))


def test_a_post_in_chunks_is_published_once_and_its_rotated_grant_is_kept(
    state, tmp_path, server, master
) -> None:
    a, s = _granted(state, tmp_path, master, size=12 * MIB)
    logs: list[Any] = []
    pub = _publisher(server)
    video_id = publish_once(a, pub, s, logs)
    assert video_id is not None and video_id.startswith("v_pub_file~")
    _assert_posted_once(state, server, s, video_id)
    [post] = server.publishes()
    assert (post["chunk_size"], post["total_chunk_count"]) == (5 * MIB, 2)
    assert post["privacy_level"] == "SELF_ONLY"
    assert post["post_info"]["title"].startswith("[mdame:")
    # The refresh token TikTok rotated to is the one sealed in the database now.
    [creator] = list(server.snapshot()["creators"])
    grant = account_grant(state, s.account, "tech", "")
    assert grant.refresh_token == server.refresh_token(creator) != REFRESH_TOKEN
    assert any(e.event == "credential_rotated" for e in state.list_events("account", s.account.id))
    # Publishing again is a no-op, and the rotated grant refreshes.
    assert publish_once(a, pub, s, logs) == video_id
    assert len(server.publishes()) == 1


@pytest.mark.parametrize(
    ("fault", "options"),
    [
        ("drop_final_chunk", {"stored": True}),  # the post is whole, its answer lost
        ("drop_final_chunk", {"stored": False}),  # nothing of the last chunk arrived
        ("chunk_5xx", {}),
        ("status_5xx", {}),
        ("init_5xx", {}),  # no post created: its initiation is not counted
        ("creator_info_5xx", {}),
    ],
)
def test_every_fault_ends_in_exactly_one_post(
    state, tmp_path, server, master, fault, options
) -> None:
    a, s = _granted(state, tmp_path, master, size=12 * MIB)
    server.faults.push(fault, **options)
    logs: list[Any] = []
    video_id = until_published(a, _publisher(server), s, logs)
    assert not server.faults.pending(), "the fault never fired"
    _assert_posted_once(state, server, s, video_id)
    assert len(server.publishes()) == 1  # resumed, never initialized again


def test_an_expired_upload_is_settled_and_posted_again_once(
    state, tmp_path, server, master
) -> None:
    a, s = _granted(state, tmp_path, master, size=12 * MIB)
    server.faults.push("chunk_5xx")
    logs: list[Any] = []
    pub = _publisher(server)
    with pytest.raises(Exception):  # noqa: B017 - the first run ends on the 5xx
        publish_once(a, pub, s, logs)
    [first] = server.publishes()
    server.expire_publish(first["publish_id"])
    video_id = until_published(a, pub, s, logs)
    assert video_id != first["publish_id"]
    _assert_posted_once(state, server, s, video_id)


def test_a_post_that_fails_processing_is_settled_and_posted_again_once(
    state, tmp_path, server, master
) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    server.faults.push("processing_failed")
    video_id = until_published(a, _publisher(server), s, [])
    first, second = server.publishes()
    assert first["status"] == "FAILED" and second["publish_id"] == video_id
    _assert_posted_once(state, server, s, video_id)


def test_the_daily_post_cap_pauses_the_account(state, tmp_path, server, master) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    creator = server.add_creator("tech", REFRESH_TOKEN, daily_post_cap=0)
    logs: list[Any] = []
    assert publish_once(a, _publisher(server), s, logs) is None
    status = state.account_status(s.account.id)
    assert status.pause_reason == "spam_risk_too_many_posts" and status.paused_until
    assert state.get_work_unit("publication", "pu").state == "pending"
    assert server.videos(creator) == []


def test_the_unaudited_apps_creator_cap_pauses_the_account_and_names_the_fix(
    state, tmp_path, server, master
) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    server.unaudited_user_cap = 1
    other = server.add_creator("other", "rt-other-not-secret")
    server.count_post(other)  # one creator already posted for the app today
    logs: list[Any] = []
    assert publish_once(a, _publisher(server), s, logs) is None
    status = state.account_status(s.account.id)
    assert status.pause_reason == "reached_active_user_cap" and status.paused_until
    assert not status.needs_reauth  # the creator's grant is fine: nothing to reconnect
    [alert] = _alerts(state, "quota_exhausted")
    assert "reached_active_user_cap" in alert and "have the app audited" in alert
    assert state.get_work_unit("publication", "pu").state == "pending"


@pytest.mark.parametrize("paced", [True, False])
def test_status_polls_keep_to_the_per_minute_limit_through_the_ledger(
    state, tmp_path, server, master, paced
) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    # Processing outlasts two polls, and TikTok's window allows only two: a third must wait.
    server.set_limits(status_per_minute=2, rate_window=1.0, processing_delay=0.5)
    [creator] = list(server.snapshot()["creators"])
    pub = _publisher(
        server,
        processing_polls=8,
        processing_poll_s=0.05,
        status_per_minute=2 if paced else 50,
        rate_window_s=1.0,
    )
    if not paced:  # the control: TikTok's limit is real, and a poll past it is answered 429
        with pytest.raises(ChannelError, match="rate_limit_exceeded"):
            publish_once(a, pub, s, [])
        assert server.counters(creator)["throttled"] == 1
        return
    video_id = publish_once(a, pub, s, [])
    assert video_id is not None and server.counters(creator)["throttled"] == 0
    assert sum("status/fetch" in r for r in server.requests()) >= 3
    _assert_posted_once(state, server, s, video_id)


def test_the_accounts_daily_posts_in_the_ledger_hold_the_post_back(
    state, tmp_path, server, master
) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    as_admin(a).upsert_dimension_account("tech", "tiktok", "@tech-tt", 10_000, daily_posts=0)
    logs: list[Any] = []
    assert publish_once(a, _publisher(server), s, logs) is None
    assert server.publishes() == [] and not any("creator_info" in r for r in server.requests())
    assert state.get_work_unit("publication", "pu").state == "pending"


def test_a_public_post_from_an_unaudited_app_is_refused_with_the_fix(
    state, tmp_path, server, master
) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    from mdame_assets.defs.publications.assets import publish_resumable  # as youtube_kit does

    public = replace(META, privacy_status="public")
    logs: list[Any] = []
    video_id = publish_resumable(
        a, _publisher(server), "pu", s.payload, s.account, s.video, public,
        required_reviews=["technical"], checkpoint=lambda: None,
        log=lambda status, **f: logs.append((status, f)), dimension_slug="tech",
    )  # fmt: skip
    assert video_id is None and server.publishes() == []
    alerts = [e.detail for e in state.list_events("dimension", None) if e.event == "alert"]
    text = repr(alerts) + repr(logs)
    assert "unaudited TikTok app may only post privately" in text, text
    assert REFRESH_TOKEN not in text


def test_a_revoked_grant_asks_for_a_reconnect(state, tmp_path, server, master) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    [creator] = list(server.snapshot()["creators"])
    server.revoke(creator)
    logs: list[Any] = []
    assert publish_once(a, _publisher(server), s, logs) is None
    assert state.account_status(s.account.id).needs_reauth
    assert server.publishes() == []
    assert os.environ.get("MDAME_MASTER_KEY") == master.encoded()


def _setup(state: StateStore, owner: Any, tmp_path: Path, master: MasterKey) -> Setup:
    """_granted's setup under a lock of its own, then expired: each run holds its own."""
    setup = hold(state, "tech", holder="setup")
    youtube = ready_to_publish(setup, tmp_path, size=2000)
    as_admin(setup).upsert_dimension_account("tech", "tiktok", "@tech-tt", 10_000)
    [account] = [x for x in setup.list_accounts("tech") if x.platform == "tiktok"]
    store_grant(setup, account, master)
    expire(owner, "tech")
    return Setup(
        account, {**youtube.payload, "account_id": account.id}, youtube.video, youtube.sha256
    )


def test_a_stalled_chunk_is_cut_before_the_lease_ends_and_the_next_holder_resumes(
    state, owner, tmp_path, server, master
) -> None:
    """The chunk's answer trickles in a line at a time, so no read waits long but the whole
    answer outlasts the holder's lease (its lock's 2 s plus a 1 s grace): the request is cut
    before the lease ends, so the next holder, which takes the upload over once the lease is
    over, never races it."""
    s = _setup(state, owner, tmp_path, master)
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
    assert stopped < lease_wall, f"the chunk ran {stopped - lease_wall:.1f}s past the lease"
    b = hold(state, "tech", holder="run-b")
    while state.db_now() <= lease_end:
        time.sleep(0.1)
    logs: list[Any] = []
    video_id = publish_once(b, pub, s, logs)
    assert video_id is not None
    assert len(server.publishes()) == 1  # the same post, taken over: its chunk had landed
    _assert_posted_once(state, server, s, video_id)


def test_a_token_rotated_by_a_publisher_on_the_replaced_master_key_is_kept(
    state, admin, owner, tmp_path, server, master, monkeypatch
) -> None:
    """The master key is rotated while a publisher still runs the replaced one (in its grace
    period). TikTok rotates the refresh token on that publisher's refresh and retires the old
    one: the new one is stored all the same (under the database's current key), so neither
    that publisher nor a redeployed one needs a reconnect."""
    s = _setup(state, owner, tmp_path, master)
    new = MasterKey.generate()
    aad = associated_data("dev", "tiktok", "@tech-tt")
    items = [
        {
            "account_id": account.id,
            "key_id": key_id,
            "expected_wrapped_key": base64.b64encode(wrapped).decode(),
            "wrapped_key": base64.b64encode(
                rewrap(master, new, aad, Envelope(key_id, wrapped, ct)).wrapped_key
            ).decode(),
        }
        for account, key_id, wrapped, ct in admin.stored_credentials()
        if account.id == s.account.id
    ]
    assert admin.rewrap_account_credentials(master.key_id, new.key_id, items) == []
    pub = _publisher(server)
    a = hold(state, "tech", holder="stale")
    video_id = publish_once(a, pub, s, [])  # MDAME_MASTER_KEY is still the replaced key
    assert video_id is not None
    [creator] = list(server.snapshot()["creators"])
    rotated = server.refresh_token(creator)
    assert rotated != REFRESH_TOKEN  # TikTok retired the token the grant held
    stored = state.account_credential(s.account.id)
    assert stored is not None and stored[0] == new.key_id  # under the current key
    assert open_grant(new, aad, Envelope(*stored))["refresh_token"] == rotated
    assert not state.account_status(s.account.id).needs_reauth
    # The stale publisher and a redeployed one both open the rotated grant and refresh it.
    assert account_grant(state, s.account, "tech", "").refresh_token == rotated
    monkeypatch.setenv("MDAME_MASTER_KEY", new.encoded())
    assert publish_once(a, pub, s, []) == video_id
    pub.channel(a, s.account, "tech").api.creator_info()
    assert not state.account_status(s.account.id).needs_reauth


def test_without_the_apps_key_the_account_waits_and_says_which_variable(
    state, tmp_path, server, master, monkeypatch
) -> None:
    monkeypatch.delenv("MDAME_TIKTOK_CLIENT_KEY", raising=False)
    monkeypatch.setenv("MDAME_TIKTOK_CLIENT_SECRET", "cs-not-secret")
    a, s = _granted(state, tmp_path, master, size=2000)
    logs: list[Any] = []
    pub = _publisher(server, client_key="", client_secret="")
    assert publish_once(a, pub, s, logs) is None
    [(_, unavailable)] = [entry for entry in logs if entry[0] == "account_unavailable"]
    assert "MDAME_TIKTOK_CLIENT_KEY is not set" in unavailable["reason"]
    assert "cs-not-secret" not in repr(logs)
    assert server.publishes() == []
    # The deployment's setting is at fault, not the creator's grant: nobody must reconnect.
    assert not state.account_status(s.account.id).needs_reauth
    assert any("MDAME_TIKTOK_CLIENT_KEY" in text for text in _alerts(state, "provider_refused"))
    monkeypatch.setenv("MDAME_TIKTOK_CLIENT_KEY", "ck")  # set: the next run posts
    assert publish_once(a, pub, s, logs) is not None


def _alerts(state: StateStore, cause: str) -> list[str]:
    rows = state._select("SELECT text FROM mdame.alerts WHERE cause = %s", [cause])
    return [str(text) for (text,) in rows]


def test_a_refused_app_secret_names_the_variables_and_asks_no_reconnect(
    state, tmp_path, server, master
) -> None:
    server.client_secret = "the-right-secret"
    a, s = _granted(state, tmp_path, master, size=2000)
    logs: list[Any] = []
    assert publish_once(a, _publisher(server), s, logs) is None  # sent cs-not-secret
    [(_, unavailable)] = [entry for entry in logs if entry[0] == "account_unavailable"]
    assert "invalid_client" in unavailable["reason"]
    [alert] = _alerts(state, "provider_refused")
    assert "MDAME_TIKTOK_CLIENT_SECRET" in alert and "invalid_client" in alert
    assert not state.account_status(s.account.id).needs_reauth
    assert server.publishes() == []
    assert state.get_work_unit("publication", "pu").state == "pending"
    # Fixed: the next run posts, with the grant it had all along.
    video_id = publish_once(a, _publisher(server, client_secret="the-right-secret"), s, logs)
    assert video_id is not None
    _assert_posted_once(state, server, s, video_id)


def test_statistics_of_public_posts_are_read_and_metered(state, tmp_path, server, master) -> None:
    a, s = _granted(state, tmp_path, master, size=2000)
    open_id = server.add_creator("tech", REFRESH_TOKEN, audited=True)
    public = [server.add_video(open_id, f"[mdame:{i}] a post") for i in range(21)]
    server.set_statistics(public[0], views=120, likes=7, comments=2)
    day = date(2026, 11, 30)
    asked = {**dict.fromkeys(public, day), "v_pub_file~v2-1.private": day, "7000": day}
    counters = _publisher(server).video_statistics(a, s.account, "tech", asked, day)
    # Every public post counted (a second call for the 21st); the private one and one the
    # creator does not have are left out.
    assert set(counters) == set(public)
    assert counters[public[0]] == VideoCounters(120, 7, 2)
    assert counters[public[1]] == VideoCounters(0, 0, 0)
    assert state.bucket_usage(s.account.id)["units"] == (0, 2)
    assert server.snapshot()["list_calls"][open_id] == 2


def test_the_dimensions_tiktok_settings_reach_the_post(state, tmp_path, server, master) -> None:
    """tiktok.privacy_level overrides the YouTube privacy (public here, which this unaudited
    app could not post), and the interaction toggles reach post_info."""
    a, s = _granted(state, tmp_path, master, size=2000)
    settings = (("privacy_level", "SELF_ONLY"), ("disable_comment", True))
    meta = replace(META, privacy_status="public", post_settings=settings)
    video_id = until_published(a, _publisher(server), s, [], meta=meta)
    [post] = server.publishes()
    assert post["privacy_level"] == "SELF_ONLY" and post["status"] == "PUBLISH_COMPLETE"
    info = post["post_info"]
    assert info["disable_comment"] is True and info["disable_duet"] is False
    assert info["is_aigc"] is True  # flags.synthetic_media: TikTok's AI-generated label
    _assert_posted_once(state, server, s, video_id)
