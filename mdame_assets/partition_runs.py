"""A partition's status with Dagster's side of it: the newest run of each job for the partition
(the instance's run records, found by Dagster's partition tag, as the hop sensors find them),
the first failed step's error, and when a failed job's retry is due (the hops' backoff rule).
`mdame status` prints it; the publications asset shows it as metadata in the UI."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg

from mdame_assets.defs.hops import PARTITION_NAME_TAG, ended_at, failures_in_a_row, retry_window
from mdame_core.state import StateStore
from mdame_domain.partition_status import JobRun, PartitionStatus, Wait
from mdame_pipeline.partition_facts import partition_status

RUNS_READ = 200  # newest runs of the partition read; enough for every job's last one


def _step_error(instance: dg.DagsterInstance, run_id: str) -> str:
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.STEP_FAILURE, limit=1
    ).records
    for record in records:
        event = record.event_log_entry.dagster_event
        if event is None or not event.is_step_failure:
            continue
        error = event.step_failure_data.error
        while error is not None and error.cause is not None:
            error = error.cause  # the user code's exception, not Dagster's wrapper
        message = (error.message if error else "step failed").strip().splitlines()
        step = event.step_key or "a step"
        return f"{step}: {(message[0] if message else 'step failed')[:300]}"
    return ""


def job_runs(
    instance: dg.DagsterInstance, key: str
) -> tuple[list[JobRun], dict[str, list[dg.RunRecord]]]:
    """The newest run of each job for partition `key` (newest first), and every run read, by
    job."""
    records = instance.get_run_records(
        filters=dg.RunsFilter(tags={PARTITION_NAME_TAG: key}), limit=RUNS_READ
    )
    by_job: dict[str, list[dg.RunRecord]] = {}
    for record in records:  # newest first
        by_job.setdefault(record.dagster_run.job_name, []).append(record)
    runs = []
    for job, records_of_job in by_job.items():
        newest = records_of_job[0]
        run = newest.dagster_run
        failed = run.status == dg.DagsterRunStatus.FAILURE
        runs.append(
            JobRun(
                job,
                run.status.value,
                run.run_id,
                datetime.fromtimestamp(newest.end_time, UTC) if newest.end_time else None,
                _step_error(instance, run.run_id) if failed else "",
            )
        )
    return runs, by_job


def retry_waits(key: str, by_job: dict[str, list[dg.RunRecord]], now: datetime) -> list[Wait]:
    """When each job whose newest run failed is retried under the hops' backoff rule (if its
    sensor still finds the work), while that is ahead and the day is inside the window."""
    window = retry_window()
    day = datetime.fromisoformat(key.partition("|")[0]).date()
    waits = []
    for job, records in by_job.items():
        failed = failures_in_a_row(records)
        if not failed:
            continue
        due = ended_at(records[0]) + timedelta(seconds=window.backoff(key, failed))
        if now < due and due < window.closes_at(day):
            waits.append(Wait(f"a retry of {job} after {failed} failed run(s) (backoff)", due))
    return waits


def status_of(instance: dg.DagsterInstance, state: StateStore, key: str) -> PartitionStatus:
    """The partition's status from MD-AME's state and Dagster's runs together."""
    runs, by_job = job_runs(instance, key)
    return partition_status(state, key, runs, retry_waits(key, by_job, datetime.now(UTC)))
