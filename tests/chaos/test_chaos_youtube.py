"""A slice of the publisher mode's crash matrix (`make chaos CHAOS_ARGS="--publisher youtube"`
runs all of it): the YouTubePublisher publishes to a fake channel that runs in a process of its
own, the pipeline is killed at one of the publisher's commit points, mid-chunk, and once the
channel holds the video but before its id is committed; each case must end with exactly one
video per (script, account), the render's bytes, and a quota ledger equal to the channel's
counters."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from mdame_domain.video_metadata import publication_marker
from tests.chaos.channel import ChannelProcess
from tests.chaos.child import SEND_CHUNK
from tests.chaos.crashpoint import CrashPoint
from tests.chaos.harness import ChaosConfig, CleanRun, Harness
from tests.chaos.invariants import violations

pytestmark = pytest.mark.slow

# The publisher's commit points, in the order a clean upload commits them.
PUBLISHER_RPCS = (
    "begin_bucket_upload",
    "open_upload_session",
    "finish_upload",
    "record_video_processing",
)


@pytest.fixture(scope="module")
def harness(template_db: str, chaos_media: Path) -> Iterator[Harness]:
    config = ChaosConfig(jobs=2, media_root=chaos_media, publisher="youtube")
    with Harness(config) as chaos:
        yield chaos


@pytest.fixture(scope="module")
def clean(harness: Harness) -> CleanRun:
    return harness.clean_run()


def test_the_clean_run_uploads_in_several_chunks_after_committing_its_session(
    clean: CleanRun,
) -> None:
    assert clean.violations == ()
    commits = list(clean.commits)
    for rpc in PUBLISHER_RPCS:
        assert rpc in commits, rpc
    assert "begin_upload" not in commits  # the bucketed resumable path only
    chunks = [i for i, rpc in enumerate(commits) if rpc == SEND_CHUNK]
    assert len(chunks) >= 3, "the render should span several chunks"
    # The session is committed before its first byte, the video id after its last.
    assert commits.index("open_upload_session") < chunks[0]
    assert chunks[-1] < commits.index("finish_upload") < commits.index("record_video_processing")


def test_kills_in_the_publisher_converge_to_one_video_with_the_renders_bytes(
    harness: Harness, clean: CleanRun
) -> None:
    chunk, n = clean.nth(SEND_CHUNK, -1)
    points = [
        CrashPoint("open_upload_session", 1, "after"),  # committed, not one byte sent
        CrashPoint(SEND_CHUNK, 2, "before"),  # mid-transfer: half of chunk 2 sent
        CrashPoint(chunk, n, "after"),  # the video exists, its id not yet committed
    ]

    cases = harness.run_cases(clean, points)

    failed = [f"{c.point}: {c.result}" for c in cases if not c.ok]
    assert not failed, "\n".join(failed)
    assert all(c.died and c.reruns >= 1 for c in cases)


def _upload_behind_our_back(channel: ChannelProcess, token: str, description: str) -> None:
    """A second video on the channel, sent straight to it (what a double publish would leave)."""
    form = urllib.parse.urlencode(
        {"grant_type": "refresh_token", "refresh_token": token, "client_id": "x"}
    ).encode()
    with urllib.request.urlopen(f"{channel.base_url}token", form, timeout=10) as answer:
        access = json.loads(answer.read())["access_token"]
    auth = {"Authorization": f"Bearer {access}"}
    body = json.dumps({"snippet": {"title": "dup", "description": description}}).encode()
    initiate = urllib.request.Request(
        f"{channel.base_url}upload/youtube/v3/videos?uploadType=resumable&part=snippet",
        body,
        {**auth, "Content-Type": "application/json", "X-Upload-Content-Length": "5"},
        method="POST",
    )
    with urllib.request.urlopen(initiate, timeout=10) as answer:
        session = answer.headers["Location"]
    put = urllib.request.Request(
        session, b"other", {**auth, "Content-Range": "bytes 0-4/5"}, method="PUT"
    )
    with urllib.request.urlopen(put, timeout=10) as answer:
        assert answer.status == 200


def test_the_channel_invariants_report_a_second_video_and_its_uncounted_insert(
    harness: Harness,
) -> None:
    assert harness.grants is not None
    with harness._fresh("tampered") as case:
        assert harness._run(case).exitcode == 0
        assert case.channel is not None
        assert violations(case.db.app, case.home, harness.media, channel=case.channel) == []
        with psycopg.connect(case.db.app) as conn:
            [(key, handle)] = conn.execute(
                """SELECT p.idempotency_key, a.handle FROM mdame.publications p
                     JOIN mdame.dimension_accounts a ON a.id = p.account_id"""
            ).fetchall()
        _upload_behind_our_back(
            case.channel, harness.grants.tokens[handle], f"dup {publication_marker(key)}"
        )

        found = violations(case.db.app, case.home, harness.media, channel=case.channel)

    assert any("the channel holds" in v for v in found), found
    assert any("insert bucket: the ledger committed 1, the channel charged 2" in v for v in found)
