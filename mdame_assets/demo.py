"""`mdame demo`: today's partition of every active dimension, trend to published video.

It runs the same jobs the schedule and sensors launch, in order (content_job, the GPU
location's scene_clips_job, publishing_job), in this process and recorded in the Dagster
instance, so the runs show up in `make ui` afterwards.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
from dagster._core.errors import DagsterExecutionInterruptedError

from mdame_assets.defs.dimensions.registry import sync_registry
from mdame_assets.interrupts import Interrupted, stop_exit_code, stop_on_signals, stop_signal_name
from mdame_assets.liveness import sweep
from mdame_assets.partitions import DIMENSION_PARTITION, PartitionRef, partition_key
from mdame_assets.runs import Outcome, run_partition
from mdame_core.state import StateStore
from mdame_resources.providers.publisher import OutboxPublisher


def _table(state: StateStore, outcomes: list[Outcome], day: date) -> list[list[str]]:
    outbox = OutboxPublisher().folder()
    rows = []
    for outcome in outcomes:
        ref = PartitionRef.parse(outcome.partition_key)
        dim = state.get_dimension(ref.dimension)
        if not outcome.ok or dim is None:
            rows.append(
                [
                    ref.dimension,
                    dim.title if dim else "?",
                    "-",
                    "-",
                    "FAILED: " + (outcome.error or "dimension not registered"),
                ]
            )
            continue
        for script in state.list_work_units(
            "script", dimension_id=dim.id, partition_date=day, state="published"
        ):
            render = state.get_work_unit("render", script.result.get("render_id", 0)) or None
            for video_id in script.result.get("video_ids", []):
                rows.append(
                    [
                        ref.dimension,
                        script.payload["script"]["hook"][:48],
                        f"{script.payload['script']['hook_score']:.2f}",
                        f"{render.payload['duration_s']:.1f}s" if render else "?",
                        _video_file(outbox / ref.dimension / video_id / "video.mp4", video_id),
                    ]
                )
    return rows


def _video_file(path: Path, video_id: str) -> str:
    # The outbox keeps a file per video; another channel is named by the video's id there.
    return str(path) if path.exists() else f"video id {video_id}"


def _print_table(rows: list[list[str]]) -> None:
    header = ["dimension", "title", "hook", "duration", "file"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def main(day: date | None = None, only: Sequence[str] = (), videos_at: str = "") -> int:
    """SIGTERM and Ctrl-C stop it promptly (the run in progress is marked failed), exit 128+N.
    `only`: these dimensions' partitions, not every active one; `videos_at`: where the chosen
    publisher puts the videos (default: the outbox folder)."""
    with stop_on_signals():
        try:
            return _main(day, only, videos_at or str(OutboxPublisher().folder()))
        except (Interrupted, DagsterExecutionInterruptedError):
            print(f"[demo] stopped by {stop_signal_name()}", file=sys.stderr)
            return stop_exit_code()


def _main(day: date | None, only: Sequence[str], videos_at: str) -> int:
    day = day or datetime.now(UTC).date()
    instance = dg.DagsterInstance.get()
    state = StateStore()
    # A demo killed earlier left its runs STARTED, holding pool slots and locks: clear them
    # first, or the scene_clips step waits behind a dead run forever.
    swept = sweep(instance, state)
    if swept:
        print(f"[demo] liveness sweep: {swept.summary()}", file=sys.stderr)
    report = sync_registry(state)
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    known = set(instance.get_dynamic_partitions(DIMENSION_PARTITION))
    instance.add_dynamic_partitions(
        DIMENSION_PARTITION, [s for s in report.active if s not in known]
    )

    started = time.monotonic()
    outcomes = []
    for slug in [s for s in report.active if not only or s in only]:
        key = str(partition_key(day, slug))
        print(f"[demo] {key}: running content -> scene clips -> publishing", file=sys.stderr)
        outcome = run_partition(instance, key, state)
        outcomes.append(outcome)
        status = "ok" if outcome.ok else f"FAILED: {outcome.error}"
        print(
            f"[demo] {key}: {status} in {outcome.seconds:.1f}s {outcome.stage_seconds}",
            file=sys.stderr,
        )
    print()
    rows = _table(state, outcomes, day)
    _print_table(rows)
    outbox = str(OutboxPublisher().folder())
    earlier = sum(row[4].startswith(outbox) for row in rows)
    if earlier and videos_at != outbox:
        # Today's partition was already published by an offline demo: nothing is published
        # twice, so those videos are in the outbox, not where this provider set publishes.
        videos_at += f" ({earlier} published earlier today by the offline demo: under {outbox})"
    lines, code = summary(outcomes, report.errors, time.monotonic() - started, videos_at)
    print("\n" + "\n".join(lines))
    print("Inspect the runs with `make ui` (http://127.0.0.1:3000).")
    state.close()
    return code


def summary(
    outcomes: Sequence[Outcome], errors: Sequence[str], seconds: float, videos_at: str
) -> tuple[list[str], int]:
    """The closing lines and the exit status, which agree: a niche file skipped as malformed
    fails the demo as a failed dimension does, and the summary names it."""
    published = sum(o.ok for o in outcomes)
    lines = [
        f"{published}/{len(outcomes)} dimensions published in {seconds:.1f}s; "
        f"videos are under {videos_at}"
    ]
    if errors:
        lines.append(f"{len(errors)} niche file(s) skipped as malformed (fix them; exit status 1):")
        lines += [f"  {error}" for error in errors]
    failed = [o.partition_key for o in outcomes if not o.ok]
    if failed:
        lines.append(f"failed: {', '.join(failed)} (exit status 1)")
    if not outcomes:
        lines.append("no active dimension to run (exit status 1)")
    return lines, 0 if outcomes and not failed and not errors else 1
