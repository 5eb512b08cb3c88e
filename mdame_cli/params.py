"""`mdame params show|rollback DIMENSION`: the Adaptive Engine's versioned parameter sets.

Exit codes: 0 done; 2 unknown dimension; 3 nothing to roll back (the dimension runs on its
YAML values); other errors 1 (main's handler).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from mdame_core.state import NotFound, StateStore
from mdame_domain.dimensions import dimension_from_json

EXIT_UNKNOWN_DIMENSION = 2
EXIT_NOTHING_TO_ROLL_BACK = 3


def _known(state: StateStore, slug: str) -> Any:
    row = state.get_dimension(slug)
    if row is None:
        known = ", ".join(d.slug for d in state.list_dimensions()) or "none"
        print(f"mdame: error: unknown dimension {slug!r} (known: {known})", file=sys.stderr)
    return row


def show(args: argparse.Namespace) -> int:
    with StateStore() as state:
        row = _known(state, args.dimension)
        if row is None:
            return EXIT_UNKNOWN_DIMENSION
        config = dimension_from_json(row.config)
        current = state.current_param_set(args.dimension)
        today = state.current_param_set(args.dimension, state.db_now().date())
        tuned = config.tuned(current.params if current else None, current.version if current else 0)
        where = f"version {tuned.version}" if current else "version 0 (the YAML's values)"
        print(f"{args.dimension}: current parameter set {where}")
        if current is not None and (today is None or today.version != current.version):
            print(
                f"  read from {current.effective_from} on (today's runs read version "
                f"{today.version if today else 0})"
            )
        for name, value in tuned.to_json().items():
            print(f"  {name:<18} {json.dumps(value, sort_keys=True)}")
        history = state.param_sets(args.dimension)
        if history:
            print("history:")
        for s in history:
            status = f"rolled back {s.rolled_back_at:%Y-%m-%d %H:%M}" if s.rolled_back_at else ""
            parent = s.parent_version if s.parent_version is not None else 0
            print(
                f"  v{s.version} (from v{parent}) week {s.week_start} effective "
                f"{s.effective_from} {status}".rstrip()
            )
            for line in s.explanation.splitlines():
                print(f"      {line}")
    return 0


def rollback(args: argparse.Namespace) -> int:
    with StateStore(role="admin") as state:  # undoing a set is the operator's
        if _known(state, args.dimension) is None:
            return EXIT_UNKNOWN_DIMENSION
        try:
            undone, now = state.rollback_param_set(args.dimension, args.reason)
        except NotFound as exc:
            print(f"mdame: {exc.message}", file=sys.stderr)
            return EXIT_NOTHING_TO_ROLL_BACK
    now_text = f"version {now}" if now else "version 0 (the YAML's values)"
    print(f"{args.dimension}: rolled back version {undone}; current is {now_text}")
    return 0


def add_parsers(groups: Any) -> None:
    params = groups.add_parser("params", help="the Adaptive Engine's parameter sets")
    commands = params.add_subparsers(dest="command", required=True)
    sh = commands.add_parser("show", help="the current set, its version and the history")
    sh.add_argument("dimension")
    sh.set_defaults(func=show)
    rb = commands.add_parser("rollback", help="restore the previous parameter set")
    rb.add_argument("dimension")
    rb.add_argument("--reason", default="rolled back by an operator (mdame params rollback)")
    rb.set_defaults(func=rollback)
