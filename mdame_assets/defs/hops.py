"""Sensors that carry a partition across the code-location hop, read from PostgreSQL.

A run cannot span two code locations, so the state machine in PostgreSQL is the hand-off:
scripts in 'planned' need the GPU location; scripts past 'visuals_ready' need publishing.

What a hop sensor requests, for each partition with such scripts, is decided from the
instance's own record of that job's runs for the partition (`hop_decision`):
- a run of the job for the partition is queued or in progress: nothing (it will do the work);
- no run since the partition's newest update: one run, run_key `<hop>:<partition>:<update>`;
- runs since then, none of which moved the partition on (they failed, or ended with the work
  still there): a retry, at most MAX_RETRIES of them, each after a backoff that doubles from
  RETRY_BACKOFF_S; the run_key names the retry, `...:retry<n>`;
- MAX_CONSECUTIVE_FAILURES failed runs in a row, progress or not: nothing more until an operator
  looks (a run that fails after touching its rows would otherwise retry forever).
The decision depends only on the database and the run records, never on the clock's bucket,
so evaluating a sensor again while nothing changed requests nothing new (the same run_key).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg

from mdame_assets.jobs import partition_tags
from mdame_assets.lifecycle import script_states
from mdame_assets.partitions import partition_key
from mdame_core.state import PartitionWork

AWAITING_CLIPS = ("planned",)
AWAITING_PUBLISHING = script_states("visuals_ready", "publishing")

# How often each hop sensor looks for work. MDAME_HOP_SENSOR_INTERVAL_S shortens it where a
# person or a test waits on the hop (the UI browser test: a backfill crosses both hops).
HOP_SENSOR_INTERVAL_S = int(os.environ.get("MDAME_HOP_SENSOR_INTERVAL_S") or 30)
MAX_RETRIES = 3
RETRY_BACKOFF_S = 120.0
MAX_CONSECUTIVE_FAILURES = 5
PARTITION_NAME_TAG = "dagster/partition"  # Dagster's own tag: a run's full partition key
IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


@dataclass(frozen=True)
class HopDecision:
    run_key: str | None
    reason: str


def hop_decision(
    prefix: str,
    key: str,
    last_update: datetime,
    runs: Sequence[dg.RunRecord],
    now: datetime,
) -> HopDecision:
    """What to request for one partition, given its job's runs for it (newest first)."""
    if any(r.dagster_run.status in IN_PROGRESS for r in runs):
        return HopDecision(None, f"{key}: a run is queued or in progress")
    base = f"{prefix}:{key}:{last_update.isoformat()}"
    failures = 0
    for record in runs:
        if record.dagster_run.status != dg.DagsterRunStatus.FAILURE:
            break
        failures += 1
    if failures >= MAX_CONSECUTIVE_FAILURES:
        return HopDecision(None, f"{key}: {failures} failed runs in a row; needs an operator")
    since = [r for r in runs if r.create_timestamp > last_update]
    if not since:
        return HopDecision(base, f"{key}: new work")
    retries = len(since)
    if retries > MAX_RETRIES:
        return HopDecision(None, f"{key}: {MAX_RETRIES} retries made no progress")
    ended = max(
        (r.end_time for r in since if r.end_time is not None),
        default=since[0].create_timestamp.timestamp(),
    )
    wait_s = RETRY_BACKOFF_S * 2 ** (retries - 1)
    if now.timestamp() < ended + wait_s:
        return HopDecision(None, f"{key}: retry {retries} after {wait_s:.0f}s backoff")
    return HopDecision(f"{base}:retry{retries}", f"{key}: retry {retries}, no progress since")


def hop_sensor_result(
    context: dg.SensorEvaluationContext, job_name: str, prefix: str, work: list[PartitionWork]
) -> dg.SensorResult:
    now = datetime.now(UTC)
    requests, skipped = [], []
    for item in work:
        key = str(partition_key(item.partition_date, item.dimension_slug))
        runs = context.instance.get_run_records(
            filters=dg.RunsFilter(job_name=job_name, tags={PARTITION_NAME_TAG: key}),
            limit=MAX_RETRIES + MAX_CONSECUTIVE_FAILURES + 1,
        )
        decision = hop_decision(prefix, key, item.last_update, runs, now)
        if decision.run_key is None:
            skipped.append(decision.reason)
            continue
        requests.append(
            dg.RunRequest(run_key=decision.run_key, partition_key=key, tags=partition_tags(key))
        )
    reason = None
    if not requests:
        reason = "; ".join(skipped) if skipped else "no partition awaits this hop"
    return dg.SensorResult(run_requests=requests, skip_reason=reason)
