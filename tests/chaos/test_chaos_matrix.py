"""A bounded slice of the crash matrix (`make chaos` runs all of it): crash points spread over
the stages, each killed before and after its commit, rerun, and checked with the harness's
invariants against the clean run's end state."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.chaos.harness import ChaosConfig, CleanRun, Harness, expand

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def harness(template_db: str) -> Iterator[Harness]:
    with Harness(ChaosConfig(jobs=2)) as chaos:
        yield chaos


@pytest.fixture(scope="module")
def clean(harness: Harness) -> CleanRun:
    return harness.clean_run()


def test_the_clean_run_is_consistent_and_covers_every_stage(clean: CleanRun) -> None:
    assert clean.violations == ()
    for rpc in ("upsert_work_unit", "enqueue_job", "complete_job", "record_attempt"):
        assert rpc in clean.commits
    assert len(clean.crash_points()) > 50


def test_crashes_across_the_stages_converge_to_the_clean_end_state(
    harness: Harness, clean: CleanRun
) -> None:
    points = expand(
        [
            clean.nth("upsert_work_unit", 1),  # trends: the first row of the run
            clean.nth("enqueue_job", -1),  # scene_plan: the last scene job queued
            clean.nth("complete_job", 1),  # scene_clips: a job done under a lease
            clean.transition_to("script", "voiced"),  # voice_tracks
            clean.nth("record_attempt", 1),  # publications: before/after 'submitted'
            clean.transition_to("publication", "published"),
        ]
    )

    cases = harness.run_cases(clean, points)

    failed = [f"{c.point}: {c.result}" for c in cases if not c.ok]
    assert not failed, "\n".join(failed)
    assert all(c.died and c.reruns >= 1 for c in cases)


def test_a_crash_once_the_last_clip_is_cached_leaves_no_job_behind(
    harness: Harness, clean: CleanRun
) -> None:
    (case,) = harness.run_cases(clean, expand([clean.nth("put_scene_cache", -1)], ("after",)))

    assert case.ok, case.result
