"""`make chaos` (python -m tests.chaos.main): the full crash matrix of one partition, as a table
and a summary."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from collections.abc import Sequence
from datetime import date
from pathlib import Path

from mdame_core import settings

# As the Makefile: dev unless set (the harness refuses prod anyway); before the imports below,
# which load the definitions, and those read ENV.
settings.default_env()

from tests.chaos.crashpoint import CrashPoint  # noqa: E402
from tests.chaos.harness import (  # noqa: E402
    PHASES,
    PUBLISHERS,
    CaseResult,
    ChaosConfig,
    Harness,
    expand,
)

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
    points: list[tuple[str, int]], only: Sequence[str], limit: int | None, start: str = ""
) -> list[CrashPoint]:
    """The crash points to run: all (before and after), or those named `rpc:n[:phase]`; with
    `start`, only those from the first commit of that RPC on."""
    if start:
        if (start, 1) not in points:
            raise ValueError(f"{start} is not committed by the clean run")
        points = points[points.index((start, 1)) :]
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


def main(
    config: ChaosConfig, only: Sequence[str] = (), limit: int | None = None, start: str = ""
) -> int:
    started = time.monotonic()
    printed = threading.Lock()

    def progress(case: CaseResult) -> None:
        with printed:
            print(f"[chaos] {' '.join(_row(case))}", file=sys.stderr, flush=True)

    with Harness(config) as harness:
        print(
            f"[chaos] clean run of {config.partition_key} (publisher {config.publisher}) ...",
            file=sys.stderr,
            flush=True,
        )
        clean = harness.clean_run()
        points = clean.crash_points()
        print(
            f"[chaos] clean run: {len(clean.commits)} commits in {clean.seconds:.1f}s, "
            f"{len(points)} crash points (heartbeats excluded)",
            file=sys.stderr,
            flush=True,
        )
        chosen = select(points, only, limit, start)
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
        f"\n{config.partition_key} ({config.publisher}): {len(points)} crash points, "
        f"{len(cases)} cases "
        f"(before and after commit), {len(cases) - len(failed)} converged, {len(failed)} failed; "
        f"wall time {wall:.0f}s with {config.jobs} at once"
    )
    return 0 if cases and not failed and not clean.violations else 1


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tests.chaos.main",
        description="crash the pipeline at every commit boundary, rerun, check invariants",
    )
    parser.add_argument("--day", default="2026-11-29", help="partition day (default 2026-11-29)")
    parser.add_argument("--dimension", default="science", help="dimension slug (default science)")
    parser.add_argument("--jobs", type=int, default=2, help="cases run at once (default 2)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="RPC:N[:PHASE]",
        help="run only this crash point (repeatable; both phases unless PHASE is given)",
    )
    parser.add_argument("--limit", type=int, default=None, help="only the first N crash points")
    parser.add_argument(
        "--from",
        dest="start",
        default="",
        metavar="RPC",
        help="only the crash points from the first commit of RPC on (e.g. begin_bucket_upload:"
        " the publishing stage)",
    )
    parser.add_argument(
        "--lock-ttl", type=int, default=2, help="lock TTL and job lease in seconds (default 2)"
    )
    parser.add_argument("--media-root", default="", help="reuse this media store across runs")
    parser.add_argument(
        "--no-memo", action="store_true", help="regenerate clips and re-analyse renders per run"
    )
    parser.add_argument(
        "--keep-failed", action="store_true", help="keep a failed case's database and home"
    )
    parser.add_argument(
        "--publisher",
        choices=PUBLISHERS,
        default="outbox",
        help="outbox (default), or youtube or tiktok: that platform's publisher to a fake of it "
        "per case, with its commit points and every chunk PUT (send_chunk) as crash points",
    )
    parser.add_argument(
        "--chunk-bytes",
        type=int,
        default=None,
        help="the YouTube upload's chunk size (default: 1 MiB in the shorts media profile, "
        "256 KiB in the tiny one, so that a render spans several)",
    )
    return parser


def cli(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    settings.mdame_env()
    if settings.is_external():
        raise SystemExit("chaos needs the local cluster: unset MDAME_DATABASE_URL")
    config = ChaosConfig(
        day=date.fromisoformat(args.day),
        dimension=args.dimension,
        jobs=args.jobs,
        lock_ttl_s=args.lock_ttl,
        job_lease_s=args.lock_ttl,
        memo=not args.no_memo,
        media_root=Path(args.media_root).resolve() if args.media_root else None,
        keep_failed=args.keep_failed,
        publisher=args.publisher,
        **({} if args.chunk_bytes is None else {"chunk_bytes": args.chunk_bytes}),
    )
    try:
        return main(config, args.only, args.limit, args.start)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(cli())
