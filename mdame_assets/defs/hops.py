"""Sensors that carry a partition across the code-location hop, read from PostgreSQL.

A run cannot span two code locations, so the state machine in PostgreSQL is the hand-off:
scripts in 'planned' need the GPU location; scripts past 'visuals_ready' need publishing.

What a hop sensor requests, for each partition with such scripts, is decided from the
instance's own record of that job's runs for the partition (`hop_decision`):
- a run of the job for the partition is queued or in progress: nothing (it will do the work);
- no run since the partition's newest update: one run, run_key `<hop>:<partition>:<update>`;
- runs since then that did not move the partition on (they failed, or ended with the work still
  there), or failed runs in a row that touched its rows on the way down: a retry, under the
  rule of mdame_domain.retry_window (capped exponential backoff with jitter, for as long as the
  partition's day is in the retry window); the run_key names the retry, `...:retry<n>`.
The decision depends only on the database and the run records, never on the clock's bucket,
so evaluating a sensor again while nothing changed requests nothing new (the same run_key).
The content job's own retries use the same rule (mdame_assets.defs.content_retry).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import dagster as dg

from mdame_assets.jobs import partition_tags
from mdame_core import settings
from mdame_core.state import PartitionWork, StateStore
from mdame_domain.retry_window import RetryWindow, retry_verdict
from mdame_domain.waits import waiting_words
from mdame_pipeline.lifecycle import script_states
from mdame_runtime.partition_keys import PartitionRef, partition_key

AWAITING_CLIPS = ("planned",)

# How often each hop sensor looks for work. MDAME_HOP_SENSOR_INTERVAL_S shortens it where a
# person or a test waits on the hop (the UI browser test: a backfill crosses both hops).
HOP_SENSOR_INTERVAL_ENV = "MDAME_HOP_SENSOR_INTERVAL_S"
RETRY_WINDOW_DAYS_ENV = "MDAME_RETRY_WINDOW_DAYS"
RETRY_BACKOFF_ENV = "MDAME_RETRY_BACKOFF_S"
RETRY_BACKOFF_MAX_ENV = "MDAME_RETRY_BACKOFF_MAX_S"
PARTITION_NAME_TAG = "dagster/partition"  # Dagster's own tag: a run's full partition key
IN_PROGRESS = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.CANCELING,
]


def hop_sensor_interval() -> int:
    """The hop sensors' minimum interval, in seconds: read as the code location loads, since
    Dagster takes it from the sensor's definition."""
    return int(settings.get(HOP_SENSOR_INTERVAL_ENV))


def hop_sensor(
    name: str, job_name: str, what: str
) -> Callable[[Callable[..., dg.SensorResult]], dg.SensorDefinition]:
    """A sensor that looks for work every MDAME_HOP_SENSOR_INTERVAL_S (read as the location
    loads) and requests `job_name`; its description is `what` it requests, and how often."""
    interval = hop_sensor_interval()
    return dg.sensor(
        name=name,
        job_name=job_name,
        minimum_interval_seconds=interval,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description=f"{what} Looks every {interval} s (MDAME_HOP_SENSOR_INTERVAL_S).",
    )


def retry_window() -> RetryWindow:
    """The retry rule's settings, read at every evaluation (a test shortens them)."""
    return RetryWindow(
        days=settings.get(RETRY_WINDOW_DAYS_ENV),
        backoff_s=settings.get(RETRY_BACKOFF_ENV),
        backoff_max_s=settings.get(RETRY_BACKOFF_MAX_ENV),
    )


def runs_by_partition(
    instance: dg.DagsterInstance,
    job_name: str,
    keys: Iterable[str],
    created_after: datetime | None = None,
) -> dict[str, list[dg.RunRecord]]:
    """The job's runs for each partition key, newest first, read in one query."""
    wanted = sorted(set(keys))
    found: dict[str, list[dg.RunRecord]] = defaultdict(list)
    if not wanted:
        return found
    records = instance.get_run_records(
        filters=dg.RunsFilter(
            job_name=job_name, tags={PARTITION_NAME_TAG: wanted}, created_after=created_after
        )
    )
    for record in records:  # newest first: the storage orders by id, descending
        found[record.dagster_run.tags[PARTITION_NAME_TAG]].append(record)
    return found


def in_progress(runs: Sequence[dg.RunRecord]) -> bool:
    return any(r.dagster_run.status in IN_PROGRESS for r in runs)


def failures_in_a_row(runs: Sequence[dg.RunRecord]) -> int:
    """How many of the newest runs failed, counting back to the first that did not."""
    count = 0
    for record in runs:
        if record.dagster_run.status != dg.DagsterRunStatus.FAILURE:
            break
        count += 1
    return count


def ended_at(record: dg.RunRecord) -> datetime:
    if record.end_time is not None:
        return datetime.fromtimestamp(record.end_time, UTC)
    return record.create_timestamp


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
    window: RetryWindow,
    waits_until: datetime | None = None,
) -> HopDecision:
    """What to request for one partition, given its job's runs for it (newest first) and until
    when an upload of its waits (PartitionWork.waits_until): not before then, and at once
    after it when the newest run ended before it (that run met the wait, which is no failure)."""
    if in_progress(runs):
        return HopDecision(None, f"{key}: a run is queued or in progress")
    if waits_until is not None and waits_until > now:
        return HopDecision(None, f"{key}: {waiting_words(waits_until)}")
    base = f"{prefix}:{key}:{last_update.isoformat()}"
    if waits_until is not None and (not runs or ended_at(runs[0]) < waits_until):
        return HopDecision(f"{base}:after:{waits_until.isoformat()}", f"{key}: its wait is over")
    since = [r for r in runs if r.create_timestamp > last_update]
    failed = failures_in_a_row(runs)
    # A failed run that touched the partition's rows moved its update past its own start: that
    # is no new work but a failure, or such a run would be requested again at once, forever.
    failed_after_touching = not since and failed > 0 and ended_at(runs[0]) >= last_update
    if not since and not failed_after_touching:
        return HopDecision(base, f"{key}: new work")
    retry = max(len(since), failed)
    day = PartitionRef.parse(key).day
    verdict = retry_verdict(window, key, day, retry, ended_at(runs[0]), now)
    if not verdict.due:
        return HopDecision(None, verdict.reason)
    if since:
        return HopDecision(f"{base}:retry{len(since)}", f"{verdict.reason}, no progress since")
    return HopDecision(base, f"{verdict.reason}, after {failed} failed run(s) in a row")


def hop_sensor_result(
    context: dg.SensorEvaluationContext, job_name: str, prefix: str, work: list[PartitionWork]
) -> dg.SensorResult:
    now = datetime.now(UTC)
    window = retry_window()
    keys = {str(partition_key(w.partition_date, w.dimension_slug)): w for w in work}
    runs = runs_by_partition(context.instance, job_name, keys)
    requests, skipped = [], []
    for key, item in keys.items():
        decision = hop_decision(
            prefix, key, item.last_update, runs.get(key, []), now, window, item.waits_until
        )
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


def awaiting_publishing(state: StateStore) -> tuple[str, ...]:
    """The script states whose partition the publishing hop resumes: clips ready, not yet
    published."""
    return script_states(state, "visuals_ready", "publishing")
