"""A slice of the publisher mode's crash matrix (`make chaos CHAOS_ARGS="--publisher youtube"`
runs all of it): the YouTubePublisher publishes to a fake channel that runs in a process of its
own, the pipeline is killed at one of the publisher's commit points, mid-chunk, and once the
channel holds the video but before its id is committed; each case must end with exactly one
video per (script, account), the render's bytes, and a quota ledger equal to the channel's
counters."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.child import SEND_CHUNK
from tests.chaos.crashpoint import CrashPoint
from tests.chaos.harness import ChaosConfig, CleanRun, Harness

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
    assert "begin_upload" not in commits  # the resumable path, not the outbox's
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
