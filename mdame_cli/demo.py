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

from mdame_cli.interrupts import Interrupted, stop_exit_code, stop_on_signals, stop_signal_name
from mdame_cli.runs import Outcome, run_partition
from mdame_core.state import StateStore
from mdame_domain import timing
from mdame_domain.publish_summary import PartitionFacts, unpublished_reason
from mdame_pipeline.dimension_registry import sync_registry
from mdame_pipeline.partition_facts import partition_facts as gather_facts
from mdame_resources.providers.publisher import OutboxPublisher
from mdame_runtime.liveness import sweep
from mdame_runtime.partition_keys import DIMENSION_PARTITION, PartitionRef, partition_key
from mdame_runtime.step import hold_storage_connections

EXIT_WAITING = 75  # sysexits' EX_TEMPFAIL: nothing failed, the same command succeeds later


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
        platforms = {v.video_id: v.platform for v in state.published_videos(dim.id, day)}
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
                        _video_file(
                            outbox / ref.dimension / video_id / "video.mp4",
                            platforms.get(video_id, "?"),
                            video_id,
                        ),
                    ]
                )
    return rows


def _video_file(path: Path, platform: str, video_id: str) -> str:
    # The outbox keeps a file per video; another channel is named by the video's id there.
    return str(path) if path.exists() else f"{platform} video {video_id}"


def _print_table(rows: list[list[str]]) -> None:
    header = ["dimension", "title", "hook", "duration", "published as"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, ["-" * w for w in widths], *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


def print_time_breakdown(outcomes: Sequence[Outcome]) -> None:
    """Where the runs' wall time went, on stderr: each category as measured where its work ran
    (mdame_domain.timing), and what they leave, Dagster's run start-up and orchestration."""
    spent: dict[str, float] = {}
    for outcome in outcomes:
        for name, seconds in outcome.spent.items():
            spent[name] = spent.get(name, 0.0) + seconds
    wall = sum(outcome.seconds for outcome in outcomes)
    for line in timing.breakdown_lines(wall, spent):
        print(f"[demo] {line}", file=sys.stderr)


def main(
    day: date | None = None,
    only: Sequence[str] = (),
    videos_at: str = "",
    dimensions: Path | None = None,
) -> int:
    """SIGTERM and Ctrl-C stop it promptly (the run in progress is marked failed), exit 128+N.
    `only`: these dimensions' partitions, not every active one; `videos_at`: where the chosen
    publisher puts the videos (default: the outbox folder); `dimensions`: the niche files
    (default: settings.dimensions_dir())."""
    with stop_on_signals():
        try:
            # Entered, so that definitions loaded during the runs see this instance's state
            # storage (Dagster keeps it in a context variable), and it is disposed at the end.
            with dg.DagsterInstance.get() as instance:
                hold_storage_connections(instance)
                folder = videos_at or str(OutboxPublisher().folder())
                return _main(instance, day, only, folder, dimensions)
        except (Interrupted, DagsterExecutionInterruptedError):
            print(f"[demo] stopped by {stop_signal_name()}", file=sys.stderr)
            return stop_exit_code()


def _main(
    instance: dg.DagsterInstance,
    day: date | None,
    only: Sequence[str],
    videos_at: str,
    dimensions: Path | None,
) -> int:
    day = day or datetime.now(UTC).date()
    state = StateStore()
    with StateStore(role="admin") as admin:  # the operator's: dead runs' locks, the registry
        # A demo killed earlier left its runs STARTED, holding pool slots and locks: clear them
        # first, or the scene_clips step waits behind a dead run forever.
        swept = sweep(instance, state, operator=admin)
        if swept:
            print(f"[demo] liveness sweep: {swept.summary()}", file=sys.stderr)
        report = sync_registry(admin, dimensions)
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    known = set(instance.get_dynamic_partitions(DIMENSION_PARTITION))
    instance.add_dynamic_partitions(
        DIMENSION_PARTITION, [s for s in report.active if s not in known]
    )

    started = time.monotonic()
    outcomes = []
    slugs = [s for s in report.active if not only or s in only]
    # One read says which partitions a run would still find work in (the recovery pass's
    # included); a finished one is reported from the database without its three runs.
    unfinished = set(state.unfinished_partitions(day, slugs))
    for slug in slugs:
        key = str(partition_key(day, slug))
        if slug not in unfinished:
            print(f"[demo] {key}: finished earlier, nothing to run", file=sys.stderr)
            outcomes.append(Outcome(key, ok=True, seconds=0.0, stage_seconds={}))
            continue
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
    facts = [partition_facts(state, outcome) for outcome in outcomes]
    lines, code = summary(facts, report.errors, time.monotonic() - started, videos_at)
    print("\n" + "\n".join(lines))
    print("Inspect the runs with `make ui` (http://127.0.0.1:3000).")
    print_time_breakdown(outcomes)
    state.close()
    return code


def partition_facts(state: StateStore, outcome: Outcome) -> PartitionFacts:
    """What the database recorded for the outcome's partition (mdame_pipeline.partition_facts,
    which `mdame status` reads too), with the run's outcome."""
    return gather_facts(state, outcome.partition_key, outcome.ok, outcome.error)


def summary(
    facts: Sequence[PartitionFacts], errors: Sequence[str], seconds: float, videos_at: str
) -> tuple[list[str], int]:
    """The closing lines and the exit status, which agree. A dimension counts as published when
    a video of its partition is; one that published nothing gets a line saying why. Exit 0 when
    every dimension published or had nothing to publish by its own rules (every topic rejected:
    the pipeline did its job); 1 for a failed stage, a hold an operator has to look at (budget
    cap, voice HALT, quota, a skipped account), or a niche file skipped as malformed; otherwise
    EXIT_WAITING (75, sysexits' EX_TEMPFAIL) when a dimension's upload waits for a time it names
    (a killed run's lease): nothing failed, run again after it."""
    published = [f for f in facts if f.videos]
    videos = sum(f.videos for f in facts)
    lines = [
        f"{len(published)}/{len(facts)} dimensions published ({videos} video"
        f"{'' if videos == 1 else 's'}) in {seconds:.1f}s; videos are under {videos_at}"
    ]
    held, empty, waiting = [], [], []
    for f in facts:
        if f.videos:
            continue
        verdict = unpublished_reason(f)
        if verdict.expected:
            empty.append(f.dimension)
            lines.append(f"  {f.dimension}: nothing to publish: {verdict.reason}")
        elif verdict.waiting and f.ran_ok:
            waiting.append(f.dimension)
            lines.append(f"  {f.dimension}: not published yet: {verdict.reason}")
        else:
            if f.ran_ok:
                held.append(f.dimension)
            lines.append(f"  {f.dimension}: not published: {verdict.reason}")
    if errors:
        lines.append(f"{len(errors)} niche file(s) skipped as malformed (fix them; exit status 1):")
        lines += [f"  {error}" for error in errors]
    failed = [f.partition_key for f in facts if not f.ran_ok]
    if held:
        lines.append(f"held back: {', '.join(held)} (see above; exit status 1)")
    if failed:
        lines.append(f"failed: {', '.join(failed)} (exit status 1)")
    if not facts:
        lines.append("no active dimension to run (exit status 1)")
    code = 0 if facts and not failed and not held and not errors else 1
    if code == 0 and waiting:
        code = EXIT_WAITING
        lines.append(
            f"waiting: {', '.join(waiting)} (nothing failed; run again once the time above has "
            f"passed; exit status {EXIT_WAITING})"
        )
    if code == 0 and empty:
        lines.append(
            f"{', '.join(empty)}: rejected by their own rules, nothing to fix (exit status 0)"
        )
    return lines, code
