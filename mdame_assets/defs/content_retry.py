"""Orchestrator: a partition whose content run failed is requested again until it publishes or
its day leaves the retry window.

The daily schedule requests each active dimension's content run once. For every partition of
the retry window (the active dimensions x the window's days) whose newest content_job run
failed, this sensor requests content_job again under the rule of mdame_domain.retry_window
(retry n = the failed runs in a row, after a capped backoff with jitter), unless a run of it is
queued or in progress or the partition has published a video. The run_key names the failed run
it follows, `content:<partition>:retry<n>:<run id>`: the same facts give the same key, and each
new failure a new one. It looks as often as the hop sensors (MDAME_HOP_SENSOR_INTERVAL_S, read
as the location loads: the sensor is built then), and reads the content runs of every candidate
partition in one query.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import dagster as dg

from mdame_assets.defs.hops import (
    ended_at,
    failures_in_a_row,
    hop_sensor,
    in_progress,
    retry_window,
    runs_by_partition,
)
from mdame_assets.jobs import CONTENT_JOB, content_job, partition_tags
from mdame_core.state import Dimension, StateStore
from mdame_domain.retry_window import RetryWindow, retry_verdict
from mdame_resources.state import StateStoreResource
from mdame_runtime.partition_keys import partition_key


def content_retry_result(
    instance: dg.DagsterInstance, client: StateStore, now: datetime, window: RetryWindow
) -> dg.SensorResult:
    today = now.astimezone(UTC).date()
    first = window.first_day(today)
    days = [first + timedelta(days=n) for n in range((today - first).days + 1)]
    candidates: dict[str, tuple[date, Dimension]] = {}
    for dimension in client.list_dimensions(active_only=True):
        for day in days:
            candidates[str(partition_key(day, dimension.slug))] = (day, dimension)
    runs = runs_by_partition(instance, CONTENT_JOB, candidates)
    requests, skipped = [], []
    for key, (day, dimension) in candidates.items():
        records = runs.get(key, [])
        if in_progress(records):
            skipped.append(f"{key}: a run is queued or in progress")
            continue
        failed = failures_in_a_row(records)
        if not failed:
            continue  # never run, or its newest run did not fail: nothing to retry
        scripts = client.list_work_units("script", dimension_id=dimension.id, partition_date=day)
        if any(s.state == "published" for s in scripts):
            skipped.append(f"{key}: published; its failed content run is not retried")
            continue
        verdict = retry_verdict(window, key, day, failed, ended_at(records[0]), now)
        if not verdict.due:
            skipped.append(verdict.reason)
            continue
        requests.append(
            dg.RunRequest(
                run_key=f"content:{key}:retry{failed}:{records[0].dagster_run.run_id}",
                partition_key=key,
                tags=partition_tags(key),
            )
        )
    reason = None
    if not requests:
        reason = "; ".join(skipped) or (
            f"no failed content run in the retry window ({first.isoformat()} to "
            f"{today.isoformat()})"
        )
    return dg.SensorResult(run_requests=requests, skip_reason=reason)


def content_retry(
    context: dg.SensorEvaluationContext, state: StateStoreResource
) -> dg.SensorResult:
    return content_retry_result(
        context.instance, state.get_client(), datetime.now(UTC), retry_window()
    )


def make_content_retry_sensor() -> dg.SensorDefinition:
    return hop_sensor(
        "content_retry_sensor",
        CONTENT_JOB,
        "Requests content_job again for each partition of the retry window "
        "(MDAME_RETRY_WINDOW_DAYS) whose newest content run failed, after a capped backoff with "
        "jitter (MDAME_RETRY_BACKOFF_S, MDAME_RETRY_BACKOFF_MAX_S), unless a run of it is queued "
        "or in progress or it published.",
    )(content_retry)


@dg.definitions
def defs() -> dg.Definitions:
    """The content job (the daily schedule names it too) and the sensor that retries it."""
    return dg.Definitions(jobs=[content_job()], sensors=[make_content_retry_sensor()])
