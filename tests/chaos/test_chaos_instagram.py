"""A slice of the Instagram publisher's crash matrix (`make chaos
CHAOS_ARGS="--publisher instagram"` runs all of it): the InstagramPublisher publishes a reel to
a local Instagram server that runs in a process of its own, and the pipeline is killed
mid-upload, and once the reel is published before its media id is committed. Each case must
end with exactly one reel per (script, account), with the render's bytes, and a ledger equal to
the server's count of published reels."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.child import SEND_CHUNK
from tests.chaos.crashpoint import CrashPoint
from tests.chaos.harness import ChaosConfig, CleanRun, Harness

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def harness(template_db: str, chaos_media: Path) -> Iterator[Harness]:
    config = ChaosConfig(jobs=2, media_root=chaos_media, publisher="instagram")
    with Harness(config) as chaos:
        yield chaos


@pytest.fixture(scope="module")
def clean(harness: Harness) -> CleanRun:
    return harness.clean_run()


def test_the_clean_run_commits_the_container_before_its_bytes(clean: CleanRun) -> None:
    assert clean.violations == ()
    commits = list(clean.commits)
    chunks = [i for i, rpc in enumerate(commits) if rpc == SEND_CHUNK]
    assert len(chunks) >= 2, "the render should span several upload requests"
    assert commits.index("open_upload_session") < chunks[0]
    assert chunks[-1] < commits.index("finish_upload") < commits.index("record_video_processing")


def test_kills_in_the_instagram_publisher_converge_to_one_reel_with_the_renders_bytes(
    harness: Harness, clean: CleanRun
) -> None:
    last, n = clean.nth(SEND_CHUNK, -1)
    # Two cases, one round at two jobs (the full matrix covers every commit point).
    points = [
        CrashPoint(SEND_CHUNK, 2, "before"),  # half a request's bytes sent, the connection lost
        CrashPoint(last, n, "after"),  # the reel published, its media id not yet committed
    ]

    cases = harness.run_cases(clean, points)

    failed = [f"{c.point}: {c.result}" for c in cases if not c.ok]
    assert not failed, "\n".join(failed)
    assert all(c.died and c.reruns >= 1 for c in cases)
