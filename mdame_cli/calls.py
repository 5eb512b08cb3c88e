"""`mdame calls retry --dimension D [--day YYYY-MM-DD]`: re-arms the dimension's paid calls that
a provider refused for good (a 404 model, a refused key, an invalid request), once their
configuration is fixed, so the next run sends them again.

Exit codes: 0 done (also when nothing was refused); 2 unknown dimension; other errors 1
(main's handler).
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from typing import Any

from mdame_core.state import StateStore

EXIT_UNKNOWN_DIMENSION = 2
REASON = "re-armed by an operator (mdame calls retry)"


def retry(args: argparse.Namespace) -> int:
    with StateStore(role="admin") as state:  # lifting a refusal is the operator's
        if state.get_dimension(args.dimension) is None:
            known = ", ".join(d.slug for d in state.list_dimensions()) or "none"
            print(
                f"mdame: error: unknown dimension {args.dimension!r} (known: {known})",
                file=sys.stderr,
            )
            return EXIT_UNKNOWN_DIMENSION
        rearmed = state.rearm_paid_calls(args.dimension, args.day, REASON)
    on = f" refused on {args.day}" if args.day else ""
    if not rearmed:
        print(f"{args.dimension}: no refused paid calls{on} to re-arm")
        return 0
    print(f"{args.dimension}: re-armed {len(rearmed)} refused paid call(s){on}:")
    for call in rearmed:
        what = {"key": "every call of", "model": "every call of", "request": "one request of"}
        target = f"{what[call.scope]} {call.provider}"
        if call.scope == "request":
            target += f" (work key {call.work_key})"
        print(f"  #{call.refusal_id} {call.day} {target}: {call.cause.get('error', 'refused')}")
    return 0


def add_parsers(groups: Any) -> None:
    calls = groups.add_parser("calls", help="paid provider calls (Gemini)")
    commands = calls.add_subparsers(dest="command", required=True)
    rt = commands.add_parser(
        "retry", help="re-arm the dimension's refused paid calls once their cause is fixed"
    )
    rt.add_argument("--dimension", required=True, help="the dimension's slug, e.g. tech")
    rt.add_argument(
        "--day",
        type=date.fromisoformat,
        help="only calls refused on this UTC day (YYYY-MM-DD); default: all",
    )
    rt.set_defaults(func=retry)
