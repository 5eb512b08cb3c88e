"""docs/architecture-states.md: the work units' state machine, drawn from a migrated database.

The states and transitions are rows (mdame.work_kinds, work_states, allowed_transitions) that the
SQL migrations insert and every state change checks (mdame._transition). The docs build needs no
database, so the page is committed; tests/docs/test_state_diagrams.py builds it again from a
fresh migrated database and fails when the committed page differs. Regenerate it with

    .venv/bin/python -m tests.docs.state_diagrams

(on the local cluster, `make db`: a scratch copy of the migrated template, dropped after).
"""

from __future__ import annotations

import sys

import psycopg

from mdame_core.settings import REPO_ROOT

PAGE = REPO_ROOT / "docs" / "architecture-states.md"
COMMAND = ".venv/bin/python -m tests.docs.state_diagrams"

HEADER = f"""\
# State machine

<!-- Generated from mdame.allowed_transitions by `{COMMAND}`; do not edit.
     tests/docs/test_state_diagrams.py fails when it differs from a migrated database. -->

Every unit of work is a row of its kind's table, in one state at a time. A state changes only
through `mdame._transition` (`sql/functions/work_units.sql`), which refuses (SQLSTATE `MD003`) a
move that is not a row of `mdame.allowed_transitions` and records every move as an event. The
rows come from the migrations (`sql/migrations/0028_baseline.sql` and later ones); the diagrams
below are drawn from a migrated database. `[*] -->` marks the state a unit is created in
(`mdame.work_kinds.initial_state`); `--> [*]` marks a terminal state, which nothing leaves.
A state that no arrow reaches is declared in `mdame.work_states`, but no transition leads to it.
"""


def _diagram(
    kind: str, initial: str, states: list[tuple[str, bool]], moves: list[tuple[str, str]]
) -> str:
    lines = ["```mermaid", "stateDiagram-v2", f"    [*] --> {initial}"]
    reached = {initial} | {s for move in moves for s in move}
    lines += [f"    {src} --> {dst}" for src, dst in moves]
    lines += [f"    {state}" for state, _ in states if state not in reached]
    lines += [f"    {state} --> [*]" for state, terminal in states if terminal]
    lines.append("```")
    return "\n".join(lines)


def render(conn: psycopg.Connection) -> str:
    """The page's Markdown from the database `conn` is connected to."""
    kinds = conn.execute(
        "SELECT kind, table_name, initial_state FROM mdame.work_kinds ORDER BY kind"
    ).fetchall()
    sections = [HEADER]
    for kind, table, initial in kinds:
        states = conn.execute(
            "SELECT state, is_terminal FROM mdame.work_states WHERE kind = %s ORDER BY state",
            (kind,),
        ).fetchall()
        moves = conn.execute(
            """SELECT from_state, to_state FROM mdame.allowed_transitions
                WHERE kind = %s ORDER BY from_state, to_state""",
            (kind,),
        ).fetchall()
        terminal = ", ".join(f"`{s}`" for s, t in states if t) or "none"
        sections.append(
            f"## {kind}\n\nTable `mdame.{table}`; created `{initial}`; terminal: {terminal}.\n\n"
            + _diagram(kind, initial, states, moves)
            + "\n"
        )
    return "\n".join(sections)


def main() -> int:
    from tests.scratch_db import create_database, drop_database, ensure_template

    db = create_database(ensure_template())
    try:
        with psycopg.connect(db.owner) as conn:
            text = render(conn)
    finally:
        drop_database(db.name)
    PAGE.write_text(text, encoding="utf-8")
    print(f"wrote {PAGE.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
