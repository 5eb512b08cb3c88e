"""`mdame chaos`: the full crash matrix of one partition, as a table and a summary."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Sequence

from mdame_assets.chaos.harness import PHASES, CaseResult, ChaosConfig, Harness, expand
from mdame_core.state import CrashPoint

HEADER = ("case", "crash point", "phase", "died?", "reruns", "seconds", "result")


def _row(case: CaseResult) -> tuple[str, ...]:
    return (
        str(case.index),
        f"{case.point.rpc}:{case.point.n}",
        case.point.phase,
        "yes" if case.died else "NO",
        str(case.reruns),
        f"{case.seconds:.1f}",
        case.result,
    )


def print_table(cases: Sequence[CaseResult]) -> None:
    rows = [HEADER, *(_row(c) for c in cases)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(HEADER) - 1)]
    for row in rows:
        cells = [cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)]
        print("  ".join([*cells, row[-1]]).rstrip())


def select(
    points: list[tuple[str, int]], only: Sequence[str], limit: int | None
) -> list[CrashPoint]:
    """The crash points to run: all (before and after), or those named `rpc:n[:phase]`."""
    if not only:
        chosen = expand(points[:limit] if limit else points)
        return chosen
    known = set(points)
    chosen = []
    for spec in only:
        parts = spec.split(":")
        phases = PHASES if len(parts) == 2 else (parts[2],)
        for phase in phases:
            point = CrashPoint.parse(f"{parts[0]}:{parts[1]}:{phase}")
            if (point.rpc, point.n) not in known:
                raise ValueError(f"{point.rpc}:{point.n} is not a crash point of the clean run")
            chosen.append(point)
    return chosen


def main(config: ChaosConfig, only: Sequence[str] = (), limit: int | None = None) -> int:
    started = time.monotonic()
    printed = threading.Lock()

    def progress(case: CaseResult) -> None:
        with printed:
            print(f"[chaos] {' '.join(_row(case))}", file=sys.stderr, flush=True)

    with Harness(config) as harness:
        print(f"[chaos] clean run of {config.partition_key} ...", file=sys.stderr, flush=True)
        clean = harness.clean_run()
        points = clean.crash_points()
        print(
            f"[chaos] clean run: {len(clean.commits)} commits in {clean.seconds:.1f}s, "
            f"{len(points)} crash points (heartbeats excluded)",
            file=sys.stderr,
            flush=True,
        )
        chosen = select(points, only, limit)
        cases = harness.run_cases(clean, chosen, progress)
    wall = time.monotonic() - started
    print()
    print_table(cases)
    failed = [c for c in cases if not c.ok]
    print()
    for problem in clean.violations:
        print(f"clean run: VIOLATION: {problem}")
    for case in failed:
        for problem in case.violations or [case.result]:
            print(f"case {case.index} ({case.point}): {problem}")
    print(
        f"\n{config.partition_key}: {len(points)} crash points, {len(cases)} cases "
        f"(before and after commit), {len(cases) - len(failed)} converged, {len(failed)} failed; "
        f"wall time {wall:.0f}s with {config.jobs} at once"
    )
    return 0 if cases and not failed and not clean.violations else 1
