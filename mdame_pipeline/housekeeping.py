"""Collecting stored media by the retention policy, one object at a time, crash-safe.

For each object the database lists (mdame.collectable_media), begin_media_collection decides
again under the object's lock and marks it 'collecting' (rows can no longer start naming it),
the bytes are deleted from the store, and finish_media_collection records it collected. A run
stopped between the steps leaves the mark; the next run lists marked objects first and
finishes them (deleting twice is harmless). A delete that fails leaves the object marked
unless its bytes are verifiably still there, in which case the mark is abandoned.

Dagster's runs older than the run retention are deleted with their events (instance.delete_run),
their compute logs (the compute log manager; delete_run leaves them) and the run's own folder of
op outputs under the instance's storage (nothing can read it once the run is gone), keeping the
last run of each partition and job and every run the state still references (prune_runs).
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import dagster as dg
from dagster._core.storage.local_compute_log_manager import LocalComputeLogManager

from mdame_core.state import StateStore
from mdame_domain.dimensions import dimension_from_json
from mdame_domain.media_store import MediaStore
from mdame_domain.retention import (
    RetentionPolicy,
    RetentionSettings,
    RunSummary,
    retention_policy,
    select_runs_to_delete,
)

Log = Callable[..., None]


@dataclass
class CollectionReport:
    collected: list[dict[str, Any]] = field(default_factory=list)  # uri, kind, bytes, reason
    kept: list[dict[str, Any]] = field(default_factory=list)  # needed again by the time asked
    failed: list[dict[str, Any]] = field(default_factory=list)  # delete failed: next run

    @property
    def freed_bytes(self) -> int:
        return sum(int(item["bytes"]) for item in self.collected)

    def freed_by_kind(self) -> dict[str, int]:
        by_kind: dict[str, int] = {}
        for item in self.collected:
            by_kind[item["kind"]] = by_kind.get(item["kind"], 0) + int(item["bytes"])
        return by_kind


def policy_from_registry(state: StateStore) -> RetentionPolicy:
    """The environment's defaults with every registered dimension's `retention:` block."""
    settings: list[tuple[str, RetentionSettings]] = []
    for row in state.list_dimensions():
        try:
            settings.append((row.slug, dimension_from_json(row.config).retention))
        except (TypeError, ValueError):  # a stored config of another version: defaults
            continue
    return retention_policy(settings)


def collect_media(
    state: StateStore,
    store: MediaStore,
    policy: RetentionPolicy,
    holder: str,
    limit: int = 10_000,
    log: Log | None = None,
) -> CollectionReport:
    """Collects what the policy lets go (at most `limit` objects this run)."""
    report, policy_json = CollectionReport(), policy.to_json()
    for item in state.collectable_media(policy_json, limit):
        start = state.begin_media_collection(item.uri, policy_json, holder)
        if not start.collect:
            report.kept.append({"uri": item.uri, "reason": start.reason})
            continue
        try:
            freed = store.delete(item.uri)
        except Exception as exc:  # noqa: BLE001 - one object's failure must not stop the rest
            still_there = False
            with contextlib.suppress(Exception):
                still_there = store.problem(item.uri) is None
            if still_there:
                state.abandon_media_collection(item.uri)
            report.failed.append({"uri": item.uri, "error": f"{type(exc).__name__}: {exc}"})
            if log is not None:
                log("media_collect_failed", uri=item.uri, error=str(exc)[:300])
            continue
        state.finish_media_collection(item.uri, freed or 0)
        entry = {
            "uri": item.uri,
            "kind": start.kind or item.kind,
            "bytes": freed or 0,
            "reason": start.reason[:300],
        }
        report.collected.append(entry)
        if log is not None:
            log("media_collected", **entry)
    return report


FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]
PARTITION_TAG = "dagster/partition"
_PAGE = 1000


@dataclass
class RunPruneReport:
    cutoff: datetime
    deleted: list[str] = field(default_factory=list)
    kept_last: int = 0
    kept_referenced: int = 0
    expired_last: int = 0  # partitions' last runs deleted once older than the history
    events: int = 0  # event-log rows deleted with the runs
    compute_log_bytes: int = 0  # measured where the logs are on this disk (local manager)
    run_storage_bytes: int = 0  # the runs' op-output folders under the instance's storage
    failed: list[dict[str, Any]] = field(default_factory=list)


def _records(instance: dg.DagsterInstance, filters: dg.RunsFilter) -> Iterator[dg.RunRecord]:
    cursor: str | None = None
    while True:
        page = instance.get_run_records(filters=filters, limit=_PAGE, cursor=cursor)
        yield from page
        if len(page) < _PAGE:
            return
        cursor = page[-1].dagster_run.run_id


def _summary(record: dg.RunRecord) -> RunSummary:
    run = record.dagster_run
    return RunSummary(
        run.run_id, run.job_name, run.tags.get(PARTITION_TAG), record.create_timestamp
    )


def _tree_bytes(path: Path) -> int:
    total = 0
    for folder, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(OSError):
                total += (Path(folder) / name).lstat().st_size
    return total


def _delete_compute_logs(instance: dg.DagsterInstance, run_id: str) -> int:
    """Deletes the run's captured stdout/stderr; the bytes freed where the manager keeps them
    on this host's disk (0 where it cannot tell)."""
    manager, prefix = instance.compute_log_manager, [run_id, "compute_logs"]
    freed = 0
    if isinstance(manager, LocalComputeLogManager):
        folder = Path(manager.get_captured_local_path([*prefix, "_"], "out")).parent
        freed = _tree_bytes(folder) if folder.is_dir() else 0
    manager.delete_logs(prefix=prefix)
    return freed


def _delete_run_storage(instance: dg.DagsterInstance, run_id: str) -> int:
    """The run's folder under the instance's storage (the filesystem IO manager's op outputs,
    read only by the run's own steps and re-executions of it)."""
    folder = Path(instance.storage_directory()) / run_id
    if not folder.is_dir() or folder.is_symlink():
        return 0
    freed = _tree_bytes(folder)
    shutil.rmtree(folder)
    return freed


def prune_runs(
    instance: dg.DagsterInstance,
    state: StateStore,
    days: int,
    now: datetime | None = None,
    log: Log | None = None,
    history_days: int | None = None,
) -> RunPruneReport:
    """Deletes the finished runs created more than `days` ago, with their events and compute
    logs, but the last run of each partition and job (until it is `history_days` old) and those
    the state references."""
    now = now or datetime.now(UTC)
    cutoff = now - timedelta(days=days)
    history_cutoff = None if history_days is None else now - timedelta(days=history_days)
    report = RunPruneReport(cutoff=cutoff)
    old = [
        _summary(record)
        for record in _records(instance, dg.RunsFilter(statuses=FINISHED, created_before=cutoff))
        if record.end_time is None or record.end_time < cutoff.timestamp()
    ]
    if not old:
        return report
    newer = {
        (record.dagster_run.job_name, record.dagster_run.tags.get(PARTITION_TAG))
        for record in _records(instance, dg.RunsFilter(created_after=cutoff))
    }
    referenced: set[str] = set()
    for start in range(0, len(old), _PAGE):
        referenced |= state.referenced_run_ids([run.run_id for run in old[start : start + _PAGE]])
    selection = select_runs_to_delete(old, newer, referenced, history_cutoff)
    report.kept_last, report.kept_referenced, report.expired_last = (
        len(selection.kept_last),
        len(selection.kept_referenced),
        len(selection.expired_last),
    )
    for run in selection.delete:
        try:
            events = len(instance.all_logs(run.run_id))
            instance.delete_run(run.run_id)
            report.events += events
            report.deleted.append(run.run_id)
            report.compute_log_bytes += _delete_compute_logs(instance, run.run_id)
            report.run_storage_bytes += _delete_run_storage(instance, run.run_id)
        except Exception as exc:  # noqa: BLE001 - one run's failure must not stop the rest
            report.failed.append({"run_id": run.run_id, "error": f"{type(exc).__name__}: {exc}"})
            if log is not None:
                log("run_delete_failed", run_id=run.run_id, error=str(exc)[:300])
    return report
