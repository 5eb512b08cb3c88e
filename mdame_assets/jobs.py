"""The jobs that schedules and sensors launch; the run hops code locations at scene_clips.

Jobs select their stage's assets by group. They are built when a code location loads (its
`defs()`), from the settings of that moment: their retry policy and the GPU job's executor and
runtime limit. Two rules of orchestration live here:

- one run per dimension at a time, kept in the run queue: every run of a partition carries the
  dimension tag, and dagster.yaml limits it to one run per value. The pipeline lock in
  PostgreSQL stays as the fence against a writer that lost it, not as a wait;
- transient errors (a lost connection, a busy lock, a lost lease) are retried by Dagster, with
  backoff and jitter, not by waits inside a step. Permanent failures raise
  `dg.Failure(..., allow_retries=False)` and are not retried.
"""

from __future__ import annotations

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition as AssetJob,  # what define_asset_job returns; not exported
)

from mdame_core import settings
from mdame_runtime.executors import gpu_executor, gpu_run_tags
from mdame_runtime.partition_keys import DIMENSION_PARTITION

CONTENT_GROUP, VISUALS_GROUP, PUBLISHING_GROUP = "content", "visuals", "publishing"
CONTENT_JOB, PUBLISHING_JOB, SCENE_CLIPS_JOB = "content_job", "publishing_job", "scene_clips_job"

# The tag Dagster itself puts on every run of a multi-partition key (schedule, sensor, backfill,
# a UI launch): the run queue's one-run-per-dimension limit keys on it (dagster.yaml), so
# backfills are limited too without any code of ours on their path.
DIMENSION_TAG = f"dagster/partition/{DIMENSION_PARTITION}"
PARTITION_TAG = "mdame/partition"

STEP_RETRIES_VAR, STEP_RETRY_DELAY_VAR = "MDAME_STEP_RETRIES", "MDAME_STEP_RETRY_DELAY_S"


def transient_retry() -> dg.RetryPolicy:
    """The steps' retry policy, from the settings as the definitions load. By default 4 retries
    at about 3, 6, 12, 24 s (+-50 % jitter, so retries of several steps spread out): long enough
    for a database restart or a lease to lapse, short enough that a real failure surfaces within
    a minute. The jobs apply it to every step without a policy of its own."""
    return dg.RetryPolicy(
        max_retries=settings.get(STEP_RETRIES_VAR),
        delay=settings.get(STEP_RETRY_DELAY_VAR),
        backoff=dg.Backoff.EXPONENTIAL,
        jitter=dg.Jitter.PLUS_MINUS,
    )


def content_job() -> AssetJob:
    return dg.define_asset_job(
        CONTENT_JOB,
        selection=dg.AssetSelection.groups(CONTENT_GROUP),
        op_retry_policy=transient_retry(),
        description="trends -> topics -> scripts -> scene_plan; the GPU location takes it from "
        "there.",
    )


def publishing_job() -> AssetJob:
    return dg.define_asset_job(
        PUBLISHING_JOB,
        selection=dg.AssetSelection.groups(PUBLISHING_GROUP),
        op_retry_policy=transient_retry(),
        description="voice_tracks -> renders -> publications, once the scene clips are ready.",
    )


def scene_clips_job() -> AssetJob:
    return dg.define_asset_job(
        SCENE_CLIPS_JOB,
        selection=dg.AssetSelection.groups(VISUALS_GROUP),
        executor_def=gpu_executor(),
        op_retry_policy=transient_retry(),
        tags=gpu_run_tags(),
        description="One partition's scene clips, one step per scene, on the configured executor.",
    )


def partition_tags(key: str) -> dict[str, str]:
    """Tags our run requests add for a partition. The dimension tag is not among them: Dagster
    derives it from the request's partition key (and sets it as a system tag, which user code
    may not), the same way for backfills."""
    return {PARTITION_TAG: str(key).replace("|", "_")}
