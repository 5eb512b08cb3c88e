"""`mdame report`: today's analytics and this week's Strategic Auditor report, now.

It materializes video_stats (today's partition) and strategic_audit (the current week) for
every active dimension, in this process and recorded in the Dagster instance (so the runs and
the report's metadata show up in `make ui`), then writes a readable copy of each stored report
under $MDAME_HOME/reports/<week>/ (Markdown with its images beside it: the plots' PNGs and the
week's videos' contact sheets).
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg

from mdame_assets import orchestrator
from mdame_assets.jobs import partition_tags
from mdame_core.settings import mdame_home
from mdame_core.state import StateStore
from mdame_domain.audit import Week
from mdame_domain.media_store import MediaProblem
from mdame_pipeline.dimension_registry import sync_registry
from mdame_resources.media import MediaStoreResource
from mdame_runtime.partition_keys import DIMENSION_PARTITION, partition_key, week_partition_key

QUIET = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}


def export_report(state: StateStore, dimension: str, week: Week, folder: Path) -> Path | None:
    """The stored report as <folder>/<dimension>.md with its images beside it (the plots, and
    the contact sheets still stored); None if none."""
    report = state.get_report(dimension, week.start)
    if report is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    store = MediaStoreResource().store()
    text = report.markdown
    for image in report.images:
        name = f"{dimension}-{image['name']}"
        try:
            source = store.verified_path(image["uri"], image["sha256"])
        except MediaProblem:
            # A contact sheet goes with its render (retention): the report still names it.
            continue
        (folder / name).write_bytes(source.read_bytes())
        text = text.replace(f"]({image['uri']})", f"]({name})")
    path = folder / f"{dimension}.md"
    path.write_text(text)
    return path


def _run(job: str, key: str, instance: dg.DagsterInstance) -> str:
    result = (
        orchestrator.defs()
        .resolve_job_def(job)
        .execute_in_process(
            partition_key=key,
            instance=instance,
            tags=partition_tags(key),
            raise_on_error=False,
            run_config=QUIET,
        )
    )
    if result.success:
        return ""
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data.error:
            return event.step_failure_data.error.message.strip().splitlines()[0][:300]
    return "run failed"


def main(day: date | None = None, only: Sequence[str] = ()) -> int:
    with dg.DagsterInstance.get() as instance:  # as demo.main: entered and disposed
        return _report(instance, day or datetime.now(UTC).date(), only)


def _report(instance: dg.DagsterInstance, day: date, only: Sequence[str]) -> int:
    week = Week.of(day)
    state = StateStore()
    try:
        with StateStore(role="admin") as admin:  # as `mdame demo` does: the YAMLs are the truth
            registry = sync_registry(admin)
        for error in registry.errors:
            print(f"error: {error}", file=sys.stderr)
        active = list(registry.active)
        chosen = [s for s in active if not only or s in only]
        known = set(instance.get_dynamic_partitions(DIMENSION_PARTITION))
        instance.add_dynamic_partitions(DIMENSION_PARTITION, [s for s in chosen if s not in known])
        folder = mdame_home() / "reports" / week.start.isoformat()
        failed = 0
        for slug in chosen:
            for job, key in (
                ("analytics_job", str(partition_key(day, slug))),
                ("weekly_operations_job", str(week_partition_key(week.start, slug))),
            ):
                error = _run(job, key, instance)
                if error:
                    failed += 1
                    print(f"[report] {slug}: {job} failed: {error}", file=sys.stderr)
                    break
            else:
                path = export_report(state, slug, week, folder)
                print(f"[report] {slug}: week {week.start} report at {path}")
        if not chosen:
            print("[report] no active dimensions", file=sys.stderr)
        print(
            f"Open the reports' metadata with `make ui`: asset strategic_audit, week {week.start}."
        )
        return 1 if failed or not chosen else 0
    finally:
        state.close()
