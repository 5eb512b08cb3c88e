"""The publishers' API clients keep their connections: an upload in N chunks is sent over one
kept-alive connection, not N fresh ones (each a TLS handshake in production), counted by the
TCP connections the local servers accepted. A connection the server closed is not reused, and
a forked process opens its own instead of sharing its parent's sockets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes import instagram, tiktok, youtube
from mdame_domain.tiktok import MIB, chunk_plan
from mdame_resources.providers import http_api
from mdame_resources.providers.instagram_api import InstagramApi
from mdame_resources.providers.tiktok_api import TikTokApi
from mdame_resources.providers.youtube_api import YouTubeApi

REFRESH = "rft.test-not-secret"
POST_INFO = {"title": "[mdame:k1] reuse", "privacy_level": "SELF_ONLY"}


@pytest.fixture(autouse=True)
def fresh_pools(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """This process's pools emptied before and after, their idle connections kept long enough
    that a slow machine's pauses between requests cannot expire them."""
    monkeypatch.setenv(http_api.KEEPALIVE_VAR, "600")
    http_api.close_pools()
    yield
    http_api.close_pools()


def _tiktok_upload(api: TikTokApi, video: bytes) -> str:
    plan = chunk_plan(len(video), 5 * MIB)
    assert plan.count == 3
    publish_id, upload_url = api.init_post(POST_INFO, plan)
    offset = 0
    while offset < len(video):
        start, end = plan.chunk_at(offset)
        api.put_chunk(upload_url, video[start:end], start, len(video), "video/mp4")
        offset = end
    return publish_id


def test_a_tiktok_upload_in_chunks_uses_one_connection_for_its_chunks(tmp_path: Path) -> None:
    with tiktok.running(tmp_path / "tiktok") as fake:
        fake.set_limits(processing_delay=0)
        fake.add_creator("chips", REFRESH)
        api = TikTokApi(REFRESH, "ck", "cs", base_url=fake.base_url, timeout_s=10)
        api.creator_info()  # the token refresh and the first API call
        assert fake.connections == 1
        video = os.urandom(15 * MIB + 5)
        publish_id = _tiktok_upload(api, video)
        api.fetch_status(publish_id)
        # One connection for the API calls (token, creator_info, init, status), one for the
        # three chunks to the upload_url: seven before connections were kept.
        assert fake.connections == 2
        assert fake.video_bytes(publish_id) == video

        # A second upload in this process (another account's, say) reuses both.
        fake.add_creator("crisps", "rft.other-not-secret")
        other = TikTokApi("rft.other-not-secret", "ck", "cs", base_url=fake.base_url, timeout_s=10)
        _tiktok_upload(other, os.urandom(15 * MIB + 5))
        assert fake.connections == 2


def test_an_instagram_upload_in_parts_uses_one_connection_for_its_parts(tmp_path: Path) -> None:
    with instagram.running(tmp_path / "ig") as fake:
        fake.set_processing_delay(0)
        fake.add_account("mdame.reels", "IGAA-test-token")
        api = InstagramApi("IGAA-test-token", graph_url=fake.base_url, timeout_s=10)
        container, uri = api.create_container("hello #mdame", 1000)
        video = os.urandom(64 * 1024)
        for offset in range(0, len(video), 16 * 1024):
            api.upload(uri, video[offset : offset + 16 * 1024], offset, len(video))
        api.container(container)
        # The graph calls on one connection, the four parts on another.
        assert fake.connections == 2


def test_a_youtube_session_and_its_token_refresh_share_one_connection(tmp_path: Path) -> None:
    with youtube.running(tmp_path / "yt") as fake:
        fake.add_channel("chips", REFRESH)
        api = YouTubeApi(REFRESH, "cid", "cs", root_url=fake.base_url, token_uri=fake.token_uri)
        video = os.urandom(96 * 1024)
        uri = api.initiate({"snippet": {"title": "t"}}, False, len(video), "video/mp4")
        for start in range(0, len(video), 32 * 1024):
            state = api.send_chunk(uri, video[start : start + 32 * 1024], start, len(video))
        assert state.video is not None
        assert api.query(uri, len(video)).video is not None
        # The token refresh, the initiation, three chunks and a status query: one connection.
        assert fake.connections == 1


def test_a_connection_the_server_closed_is_not_reused(tmp_path: Path) -> None:
    with tiktok.running(tmp_path / "tiktok") as fake:
        fake.set_limits(processing_delay=0)
        fake.add_creator("chips", REFRESH)
        api = TikTokApi(REFRESH, "ck", "cs", base_url=fake.base_url, timeout_s=10)
        video = os.urandom(15 * MIB + 5)
        plan = chunk_plan(len(video), 5 * MIB)
        publish_id, upload_url = api.init_post(POST_INFO, plan)
        assert api.put_chunk(upload_url, video[: 5 * MIB], 0, len(video), "video/mp4") == 206
        before = fake.connections
        fake.restart()  # closes the kept-alive connections, as a server going down does
        # The next chunks go on a new connection, not as an interruption on the dead one.
        chunk = video[5 * MIB : 10 * MIB]
        assert api.put_chunk(upload_url, chunk, 5 * MIB, len(video), "video/mp4") == 206
        assert (
            api.put_chunk(upload_url, video[10 * MIB :], 10 * MIB, len(video), "video/mp4") == 201
        )
        api.fetch_status(publish_id)  # the API's connection was closed too
        assert fake.connections == before + 2
        assert fake.video_bytes(publish_id) == video


def test_a_forked_process_opens_its_own_connections(tmp_path: Path) -> None:
    with youtube.running(tmp_path / "yt") as fake:
        fake.add_channel("chips", REFRESH)
        api = YouTubeApi(REFRESH, "cid", "cs", root_url=fake.base_url, token_uri=fake.token_uri)
        api.initiate({"snippet": {"title": "t"}}, False, 10, "video/mp4")
        assert fake.connections == 1
        pid = os.fork()
        if pid == 0:  # the child: the parent's idle connection is not its to use
            code = 1
            try:
                api.initiate({"snippet": {"title": "t"}}, False, 10, "video/mp4")
                code = 0
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        assert fake.connections == 2
        # The parent's connection was left alone by the child, and is reused.
        api.initiate({"snippet": {"title": "t"}}, False, 10, "video/mp4")
        assert fake.connections == 2
