"""The TikTok client (mdame_resources.providers.tiktok_api) against the local TikTok server:
a direct post in chunks under the real limits, rotated refresh tokens, and each failure read as
the publisher needs it (refused for good, transient, not sent, or no answer)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes import tiktok
from fakes.tiktok import FakeTikTok
from mdame_core.settings import SettingsError
from mdame_domain.channel import ChannelError, GrantRevoked, NotSent, TransferInterrupted
from mdame_domain.tiktok import MIB, PUBLISHED, caption, chunk_plan, posted_id, privacy_level
from mdame_resources.providers.tiktok_api import TikTokApi

REFRESH = "rft.test-not-secret"
BODY = {
    "snippet": {"title": "Chips get faster", "description": "What changed.\n\n[mdame:k1]"},
    "status": {"privacyStatus": "private"},
}


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeTikTok]:
    with tiktok.running(tmp_path / "tiktok") as server:
        server.set_limits(processing_delay=0)
        yield server


def _api(fake: FakeTikTok, rotated: list[str], refresh: str = REFRESH) -> TikTokApi:
    return TikTokApi(refresh, "ck", "cs", base_url=fake.base_url, timeout_s=10,
                     on_rotate=rotated.append)  # fmt: skip


def _post(api: TikTokApi, video: bytes) -> str:
    """creator_info, init, every chunk in order, then the status: the publish_id."""
    allowed = api.creator_info()["privacy_level_options"]
    post_info = {"title": caption(BODY, "mdame:k1"), "privacy_level": privacy_level(BODY, allowed)}
    plan = chunk_plan(len(video), 5 * MIB)
    publish_id, upload_url = api.init_post(post_info, plan)
    offset, answers = 0, []
    while offset < len(video):
        start, end = plan.chunk_at(offset)
        answers.append(api.put_chunk(upload_url, video[start:end], start, len(video), "video/mp4"))
        offset = end
    assert answers == [206] * (plan.count - 1) + [201]
    return publish_id


def test_a_private_post_in_chunks_under_the_real_limits(fake: FakeTikTok) -> None:
    open_id = fake.add_creator("chips", REFRESH)
    rotated: list[str] = []
    api = _api(fake, rotated)
    video = os.urandom(12 * MIB + 5)  # two chunks of 5 MiB, the last taking the remainder
    publish_id = _post(api, video)
    status = api.fetch_status(publish_id)
    assert status["status"] == PUBLISHED and status["uploaded_bytes"] == len(video)
    assert fake.video_bytes(publish_id) == video
    # A private post has no public id, and the public list does not show it.
    assert posted_id(status, publish_id) == publish_id
    assert api.list_videos()["videos"] == []
    # The rotated refresh token was handed over, and it is the one that works now.
    assert rotated == [fake.refresh_token(open_id)]
    assert fake.publishes()[0]["post_info"]["title"].startswith("[mdame:k1] Chips get faster")


def test_an_unaudited_apps_public_post_is_refused_before_init(fake: FakeTikTok) -> None:
    fake.add_creator("chips", REFRESH)
    api = _api(fake, [])
    public = {**BODY, "status": {"privacyStatus": "public"}}
    with pytest.raises(ValueError, match="the account is private"):
        privacy_level(public, api.creator_info()["privacy_level_options"])
    assert fake.publishes() == []


def test_a_revoked_grant_and_a_revoked_token_read_as_they_must(fake: FakeTikTok) -> None:
    open_id = fake.add_creator("chips", REFRESH)
    api = _api(fake, [])
    api.creator_info()
    fake.revoke(open_id)
    # The access token in hand is refused (401), and so is its refresh: TikTok's own words.
    with pytest.raises(GrantRevoked, match="invalid_grant: Refresh token is invalid or expired"):
        api.creator_info()
    assert fake.unauthorized() == ["creator_info"]
    with pytest.raises(GrantRevoked):
        _api(fake, []).creator_info()


def test_an_access_token_expired_early_is_refreshed_once_and_the_call_sent_again(
    fake: FakeTikTok,
) -> None:
    open_id = fake.add_creator("chips", REFRESH)
    rotated: list[str] = []
    api = _api(fake, rotated)
    api.creator_info()
    fake.faults.push("expire_token", on="creator_info")
    assert api.creator_info()["privacy_level_options"]
    assert fake.unauthorized() == ["creator_info"]
    # The refresh rotated the grant, and the new refresh token was handed over first.
    assert rotated[-1] == fake.refresh_token(open_id) and len(rotated) == 2
    # A fresh token refused too is the answer: said, not refreshed again.
    fake.faults.push("expire_token", on="creator_info", spare=False)
    fake.faults.push("expire_token", on="creator_info", spare=False)
    fake.faults.push("expire_token", on="creator_info", spare=False)
    seen = len(fake.requests())
    with pytest.raises(ChannelError) as refused:
        api.creator_info()
    assert (refused.value.status, refused.value.reason) == (401, "access_token_invalid")
    assert refused.value.permanent
    assert len(fake.requests()) - seen == 3  # the call, one refresh, the call again
    assert len(fake.faults.pending()) == 1


def test_limits_are_transient_and_a_5xx_is_not_permanent(fake: FakeTikTok) -> None:
    fake.add_creator("chips", REFRESH)
    fake.set_limits(init_per_minute=1)
    api = _api(fake, [])
    post_info = {"title": "t", "privacy_level": "SELF_ONLY"}
    api.init_post(post_info, chunk_plan(1000))
    with pytest.raises(ChannelError) as limited:
        api.init_post(post_info, chunk_plan(1000))
    assert (limited.value.status, limited.value.reason) == (429, "rate_limit_exceeded")
    assert not limited.value.permanent
    fake.faults.push("status_5xx")
    with pytest.raises(ChannelError) as failed:
        api.fetch_status("v_pub_file~none")
    assert failed.value.status >= 500 and not failed.value.permanent


def test_a_lost_final_chunk_answer_is_an_interruption_and_the_status_tells(
    fake: FakeTikTok,
) -> None:
    fake.add_creator("chips", REFRESH)
    api = _api(fake, [])
    video = os.urandom(1000)
    plan = chunk_plan(len(video))
    publish_id, upload_url = api.init_post({"title": "t", "privacy_level": "SELF_ONLY"}, plan)
    fake.faults.push("drop_final_chunk", stored=True)
    with pytest.raises(TransferInterrupted):
        api.put_chunk(upload_url, video, 0, len(video), "video/mp4")
    status = api.fetch_status(publish_id)
    assert status["uploaded_bytes"] == len(video) and status["status"] == PUBLISHED


def test_nothing_is_sent_past_the_deadline_or_to_an_untrusted_url(fake: FakeTikTok) -> None:
    fake.add_creator("chips", REFRESH)
    api = _api(fake, [])
    api.deadline = 0.0
    with pytest.raises(NotSent):
        api.creator_info()
    assert not any("creator_info" in r for r in fake.requests())
    with pytest.raises(SettingsError):
        TikTokApi(REFRESH, "ck", "cs", base_url="http://example.com")
    api.deadline = None
    with pytest.raises(SettingsError):
        api.put_chunk("http://10.0.0.1/upload/?upload_id=x", b"x", 0, 1, "video/mp4")
