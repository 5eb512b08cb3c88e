"""`mdame status [--dimension D] [--day DAY]`: why a partition did or did not publish, in one
table per partition, from MD-AME's state and Dagster's run records together: the stage it
reached, the last run of each job and its outcome, why nothing was published (the words of
`make demo`'s summary), what waits and until when, and the open alerts with the one command
that fixes each (mdame_domain/partition_status.py).

Exit codes: 0 (the tables say the rest); 2 an unknown dimension; other errors 1 (main's
handler).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

from mdame_core import settings

EXIT_UNKNOWN_DIMENSION = 2


def report(instance: Any, state: Any, day: date, dimensions: Sequence[str] = ()) -> list[str]:
    """The tables of `day`'s partitions of `dimensions` (default: every active one), each a
    block of lines; an unknown dimension raises LookupError naming the known ones."""
    from mdame_assets.partition_runs import status_of
    from mdame_domain.partition_status import status_text

    known = {d.slug: d for d in state.list_dimensions()}
    for slug in dimensions:
        if slug not in known:
            raise LookupError(f"unknown dimension {slug!r} (known: {', '.join(known) or 'none'})")
    slugs = list(dimensions) or [s for s, d in known.items() if d.active]
    return [status_text(status_of(instance, state, f"{day.isoformat()}|{s}")) for s in slugs]


def _status(args: argparse.Namespace) -> int:
    settings.mdame_env()
    from mdame_core.dagster_home import apply_dagster_environment

    apply_dagster_environment()
    import dagster as dg  # Dagster loads only for this command

    from mdame_core.state import StateStore

    day = args.day or datetime.now(UTC).date()
    with dg.DagsterInstance.get() as instance, StateStore() as state:
        try:
            tables = report(instance, state, day, args.dimension or ())
        except LookupError as exc:
            print(f"mdame: error: {exc.args[0]}", file=sys.stderr)
            return EXIT_UNKNOWN_DIMENSION
    if not tables:
        print(f"no active dimension: nothing to report for {day}")
    print("\n\n".join(tables))
    return 0


def add_parser(groups: Any) -> None:
    status = groups.add_parser(
        "status", help="why each partition of a day did or did not publish, and what to do"
    )
    status.add_argument(
        "--dimension", action="append", help="only this dimension (repeatable; default: active)"
    )
    status.add_argument(
        "--day", type=date.fromisoformat, help="the partitions' UTC day (default: today)"
    )
    status.set_defaults(func=_status)
