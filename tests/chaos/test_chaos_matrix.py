"""A bounded slice of the crash matrix (`make chaos` runs all of it): crash points spread over
the stages, each killed before and after its commit, rerun, and checked with the harness's
invariants against the clean run's end state."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chaos.harness import ChaosConfig, CleanRun, Harness, expand

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def harness(template_db: str, chaos_media: Path) -> Iterator[Harness]:
    with Harness(ChaosConfig(jobs=2, media_root=chaos_media)) as chaos:
        yield chaos


@pytest.fixture(scope="module")
def clean(harness: Harness) -> CleanRun:
    return harness.clean_run()


# A stage's work and its recovery point commit together in one phase RPC (0005).
PHASES = (
    "record_trends",
    "decide_topic",
    "record_script",
    "plan_scenes",
    "complete_scene_job",
    "finish_visuals",
    "record_voice",
    "record_reviewed_render",  # issue 11: record_render with technical and content reviews
    "begin_bucket_upload",  # publications: the same resumable protocol as YouTube's
    "open_upload_session",
    "finish_upload",
    "record_video_processing",
)
# The piecewise writers the phases replaced: a run commits none of them on its own any more.
SUPERSEDED = (
    "upsert_work_unit",
    "enqueue_job",
    "complete_job",
    "put_scene_cache",
    "record_attempt",
    "finish_attempt",
    "reserve_quota",
    "log_safety_decision",
    "record_review",
)


def test_the_clean_run_is_consistent_and_covers_every_stage(clean: CleanRun) -> None:
    assert clean.violations == ()
    for rpc in PHASES:
        assert rpc in clean.commits, rpc
    assert not set(SUPERSEDED) & set(clean.commits), sorted(set(SUPERSEDED) & set(clean.commits))
    # Before the phases there were 128 crash points; one commit per phase leaves about half.
    assert 30 < len(clean.crash_points()) < 100


def test_crashes_across_the_stages_converge_to_the_clean_end_state(
    harness: Harness, clean: CleanRun
) -> None:
    # One phase per point keeps CI's slice short; `make chaos` runs both phases of every commit.
    # The publisher's own points (a session before its first byte, a chunk cut short, the video
    # out but its id not recorded) are killed in tests/chaos/test_chaos_youtube.py.
    sample = [
        (clean.nth("record_trends", 1), "before"),  # trends: the first work of the run
        (clean.nth("complete_scene_job", 1), "before"),  # scene_clips: a job under a lease
        (clean.nth("record_voice", 1), "after"),  # voice_tracks
    ]
    points = [point for where, phase in sample for point in expand([where], (phase,))]

    cases = harness.run_cases(clean, points)

    failed = [f"{c.point}: {c.result}" for c in cases if not c.ok]
    assert not failed, "\n".join(failed)
    assert all(c.died and c.reruns >= 1 for c in cases)


def test_a_crash_once_the_last_clip_is_cached_leaves_no_job_behind(
    harness: Harness, clean: CleanRun
) -> None:
    # The last clip enters the scene cache inside complete_scene_job, with its scene and job.
    (case,) = harness.run_cases(clean, expand([clean.nth("complete_scene_job", -1)], ("after",)))

    assert case.ok, case.result
