"""A slice of the TikTok publisher's crash matrix (`make chaos CHAOS_ARGS="--publisher tiktok"`
runs all of it): the TikTokPublisher posts to a local TikTok server that runs in a process of
its own, and the pipeline is killed once the post is initialized and committed, mid-chunk, once
the server holds the whole file before the post's id is committed, and between TikTok's answer
to a token refresh and the commit of the rotated token. Each case must end with exactly one
post per (script, account), with the render's bytes, and a ledger equal to the server's count
of initialized posts."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import psycopg
import pytest

from mdame_domain.video_metadata import publication_marker
from tests.chaos.channel import TikTokProcess
from tests.chaos.child import SEND_CHUNK
from tests.chaos.crashpoint import CrashPoint
from tests.chaos.harness import ChaosConfig, CleanRun, Harness
from tests.chaos.invariants import violations

pytestmark = pytest.mark.slow

# The publisher's commit points, in the order a clean post commits them.
PUBLISHER_RPCS = (
    "begin_bucket_upload",
    "record_upload_initiation",
    "replace_rotated_credential",
    "open_upload_session",
    "finish_upload",
    "record_video_processing",
)


@pytest.fixture(scope="module")
def harness(template_db: str, chaos_media: Path) -> Iterator[Harness]:
    config = ChaosConfig(jobs=2, media_root=chaos_media, publisher="tiktok")
    with Harness(config) as chaos:
        yield chaos


@pytest.fixture(scope="module")
def clean(harness: Harness) -> CleanRun:
    return harness.clean_run()


def test_the_clean_run_commits_the_post_before_its_bytes_and_the_rotated_token_first(
    clean: CleanRun,
) -> None:
    assert clean.violations == ()
    commits = list(clean.commits)
    positions = [commits.index(rpc) for rpc in PUBLISHER_RPCS]
    assert positions == sorted(positions), commits
    chunks = [i for i, rpc in enumerate(commits) if rpc == SEND_CHUNK]
    # The tiny render is under TikTok's 5 MiB least chunk: it goes whole, in one PUT.
    assert len(chunks) == 1
    assert commits.index("open_upload_session") < chunks[0] < commits.index("finish_upload")


def test_kills_in_the_tiktok_publisher_converge_to_one_post_with_the_renders_bytes(
    harness: Harness, clean: CleanRun
) -> None:
    points = [
        CrashPoint("open_upload_session", 1, "after"),  # initialized, not one byte sent
        CrashPoint(SEND_CHUNK, 1, "before"),  # half the file sent, the connection lost
        CrashPoint(SEND_CHUNK, 1, "after"),  # the post exists, its id not yet committed
        # The grant is lost: the account asks for a reconnect, then posts once.
        CrashPoint("replace_rotated_credential", 1, "before"),
    ]

    cases = harness.run_cases(clean, points)

    failed = [f"{c.point}: {c.result}" for c in cases if not c.ok]
    assert not failed, "\n".join(failed)
    assert all(c.died and c.reruns >= 1 for c in cases)
    assert harness.loses_grant(points[-1]) and not any(harness.loses_grant(p) for p in points[:-1])


def _post_behind_our_back(channel: TikTokProcess, caption: str) -> None:
    """A second post on the creator's profile, sent straight to the server with the creator's
    current refresh token (what a double publish would leave)."""
    [creator] = channel.state()["creators"].values()
    token = httpx.post(
        f"{channel.base_url}v2/oauth/token/",
        data={
            "client_key": "k",
            "client_secret": "s",
            "grant_type": "refresh_token",
            "refresh_token": creator["refresh_token"],
        },
    ).json()["access_token"]
    body = b"other bytes"
    init = httpx.post(
        f"{channel.base_url}v2/post/publish/video/init/",
        headers={"Authorization": f"Bearer {token}"},
        json={
            "post_info": {"title": caption, "privacy_level": "PUBLIC_TO_EVERYONE"},
            "source_info": {
                "source": "FILE_UPLOAD",
                "video_size": len(body),
                "chunk_size": len(body),
                "total_chunk_count": 1,
            },
        },
    ).json()["data"]
    put = httpx.put(
        init["upload_url"],
        content=body,
        headers={
            "Content-Type": "video/mp4",
            "Content-Range": f"bytes 0-{len(body) - 1}/{len(body)}",
        },
    )
    assert put.status_code == 201, put.text


def test_the_tiktok_invariants_report_a_second_post_and_its_uncounted_init(
    harness: Harness,
) -> None:
    with harness._fresh("tampered") as case:
        assert harness._run(case).exitcode == 0
        assert isinstance(case.channel, TikTokProcess)
        assert violations(case.db.app, case.home, harness.media, channel=case.channel) == []
        with psycopg.connect(case.db.app) as conn:
            [(key,)] = conn.execute("SELECT idempotency_key FROM mdame.publications").fetchall()
        _post_behind_our_back(case.channel, f"[{publication_marker(key)}] dup")

        found = violations(case.db.app, case.home, harness.media, channel=case.channel)

    assert any("the channel holds" in v for v in found), found
    assert any("insert bucket: the ledger committed 1, the channel charged 2" in v for v in found)
