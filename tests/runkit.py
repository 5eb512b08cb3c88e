"""Dagster run records for the sensor tests: an instance that stores them quickly, and runs of
a partition in a given status, as the daemon would have left them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import dagster as dg

from mdame_assets.defs.hops import PARTITION_NAME_TAG
from mdame_assets.jobs import partition_tags


@contextmanager
def quick_instance(folder: Path) -> Iterator[dg.DagsterInstance]:
    """A test instance with one SQLite event log: the default opens a new database per run,
    about half a second for every failed run a test records."""
    events = {
        "module": "dagster._core.storage.event_log",
        "class": "ConsolidatedSqliteEventLogStorage",
        "config": {"base_dir": str(folder)},
    }
    with dg.instance_for_test(overrides={"event_log_storage": events}) as instance:
        yield instance


def add_run(
    instance: dg.DagsterInstance, status: dg.DagsterRunStatus, job_name: str, key: str
) -> dg.DagsterRun:
    run = dg.DagsterRun(
        job_name=job_name,
        run_id=str(uuid.uuid4()),
        status=status,
        tags={PARTITION_NAME_TAG: key, **partition_tags(key)},
    )
    instance.add_run(run)
    return run


def fail_runs(
    instance: dg.DagsterInstance, count: int, job_name: str, key: str
) -> list[dg.RunRecord]:
    """`count` runs of the job for the partition, each failed as it ended; newest first."""
    records: list[dg.RunRecord] = []
    for _ in range(count):
        run = add_run(instance, dg.DagsterRunStatus.STARTED, job_name, key)
        instance.report_run_failed(run, "the provider did not answer")
        record = instance.get_run_record_by_id(run.run_id)
        assert record is not None
        records.insert(0, record)
    return records
