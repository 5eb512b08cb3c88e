"""Housekeeping keeps Dagster's event log bounded: on a real instance with real runs of a tiny
job, the runs older than the retention go with their events, compute logs and op outputs,
but the last run of each partition and job and the runs MD-AME's state still references stay."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.storage.runs.schema import RunsTable

from mdame_assets.defs.housekeeping.assets import housekeeping
from mdame_core.state import StateStore
from mdame_domain.retention import RetentionConfigError, run_history_days, run_retention_days
from mdame_resources.media import MediaStoreResource
from mdame_resources.notify import OutboxNotifier
from mdame_resources.state import StateStoreResource, close_clients

PARTITION = "dagster/partition"


@dg.op
def hello() -> int:
    print("hello from a tiny run")  # a compute log to delete
    return 1


@dg.job(resource_defs={"io_manager": dg.FilesystemIOManager()})
def tiny() -> None:
    hello()


@dg.job(resource_defs={"io_manager": dg.FilesystemIOManager()})
def other() -> None:
    hello()


@pytest.fixture
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as fresh:
        yield fresh


def _run(instance: dg.DagsterInstance, job: dg.JobDefinition, partition: str | None) -> str:
    tags = {PARTITION: partition} if partition else {}
    return job.execute_in_process(instance=instance, tags=tags).run_id


def _age(instance: dg.DagsterInstance, run_id: str, days: float) -> None:
    """Moves the run's timestamps back (the run storage has no public API for it: its SQL,
    here in the test only)."""
    back = datetime.now(UTC) - timedelta(days=days)
    with instance.run_storage.connect() as conn:  # type: ignore[attr-defined]
        conn.execute(
            RunsTable.update()
            .where(RunsTable.c.run_id == run_id)
            .values(
                create_timestamp=back.replace(tzinfo=None),
                update_timestamp=back.replace(tzinfo=None),
                start_time=back.timestamp(),
                end_time=back.timestamp() + 1,
            )
        )


def _logs_dir(instance: dg.DagsterInstance, run_id: str) -> Path:
    return Path(instance.storage_directory()) / run_id / "compute_logs"


def test_housekeeping_deletes_old_runs_but_the_last_and_the_referenced(
    fresh_db, state: StateStore, instance: dg.DagsterInstance, tmp_path: Path, monkeypatch
) -> None:
    monkeypatch.setenv("MDAME_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MDAME_RUN_RETENTION_DAYS", raising=False)  # the default, 30 days
    monkeypatch.delenv("MDAME_RUN_HISTORY_DAYS", raising=False)  # the default, 180 days
    runs: dict[str, str] = {}
    plan = [  # name, job, partition, age in days (oldest first within a group)
        ("p1_first", tiny, "2026-10-01|tech", 40),
        ("p1_retry", tiny, "2026-10-01|tech", 39),  # the last of p1 x tiny: kept
        ("p1_other", other, "2026-10-01|tech", 40),  # the only one of p1 x other: kept
        ("p2_old", tiny, "2026-10-02|tech", 35),
        ("p2_new", tiny, "2026-10-02|tech", 1),  # a newer run of p2 x tiny: the old one goes
        ("solo_old", other, None, 250),
        # The last unpartitioned run of `other`: kept, past the history too (one per job).
        ("solo_last", other, None, 200),
        ("locked", tiny, "2026-10-03|tech", 40),  # still holds a pipeline lock
        ("running_row", tiny, "2026-10-03|tech", 39),  # its pipeline_runs row is unfinished
        ("alerted", tiny, "2026-10-03|tech", 38),  # named by an undelivered alert
        ("p3_last", tiny, "2026-10-03|tech", 2),
        ("ancient_last", tiny, "2026-05-01|tech", 200),  # the last, but past the history: goes
        ("ancient_running", other, "2026-05-01|tech", 200),  # past the history, but referenced
        ("young", tiny, "2026-11-20|tech", 29),  # within the retention: not the last, kept
        ("young_last", tiny, "2026-11-20|tech", 3),
    ]
    for name, job, partition, days in plan:
        runs[name] = _run(instance, job, partition)
        _age(instance, runs[name], days)
    assert _logs_dir(instance, runs["p1_first"]).is_dir()
    events_before = {name: len(instance.all_logs(run_id)) for name, run_id in runs.items()}

    assert state.acquire_pipeline_lock("pipeline:tech", f"{runs['locked']}:topics", 600)
    state.start_pipeline_run(runs["running_row"], None, "2026-10-03|tech", None)
    state.record_alert(
        None, "run_failure", date.today(), f"tiny run {runs['alerted']} failed: boom"
    )
    state.start_pipeline_run(runs["ancient_running"], None, "2026-05-01|tech", None)

    resources = {
        "state": StateStoreResource(database_url=fresh_db.app),
        "media": MediaStoreResource(),
        "notifier": OutboxNotifier(),
    }
    try:
        result = dg.materialize([housekeeping], resources=resources, instance=instance)
    finally:
        close_clients()
    meta = {
        k: v.value
        for k, v in result.asset_materializations_for_node("housekeeping")[0].metadata.items()
    }

    gone = {"p1_first", "p2_old", "solo_old", "ancient_last"}
    for name, run_id in runs.items():
        kept = name not in gone
        assert (instance.get_run_by_id(run_id) is not None) == kept, name
        assert (len(instance.all_logs(run_id)) > 0) == kept, name
        assert _logs_dir(instance, run_id).is_dir() == kept, name
        assert (Path(instance.storage_directory()) / run_id / "hello").is_dir() == kept, name
    assert meta["runs_deleted"] == len(gone)
    assert meta["run_events_deleted"] == sum(events_before[name] for name in gone)
    assert meta["compute_log_bytes_freed"] > 0
    assert meta["run_storage_bytes_freed"] > 0
    # Old and kept: the last of p1 x tiny, p1 x other, unpartitioned `other`; the four
    # referenced ones. The young runs are not candidates at all.
    assert meta["runs_kept_last"] == 3
    assert meta["runs_kept_referenced"] == 4
    assert meta["runs_deleted_past_history"] == 1
    assert meta["run_delete_failed"] == []


def test_run_history_days_setting() -> None:
    assert run_history_days({}) == 180
    assert run_history_days({"MDAME_RUN_HISTORY_DAYS": "400"}) == 400
    with pytest.raises(RetentionConfigError, match="MDAME_RUN_HISTORY_DAYS=20 is shorter than"):
        run_history_days({"MDAME_RUN_HISTORY_DAYS": "20"})
    with pytest.raises(RetentionConfigError, match="MDAME_RUN_HISTORY_DAYS"):
        run_history_days({"MDAME_RUN_HISTORY_DAYS": "x"})


def test_run_retention_days_setting() -> None:
    assert run_retention_days({}) == 30
    assert run_retention_days({"MDAME_RUN_RETENTION_DAYS": "7"}) == 7
    for bad in ("0", "-1", "x", "4000"):
        with pytest.raises(RetentionConfigError, match="MDAME_RUN_RETENTION_DAYS"):
            run_retention_days({"MDAME_RUN_RETENTION_DAYS": bad})
