"""The committed state diagrams (docs/architecture-states.md) are the migrated database's
allowed_transitions: a migration that adds or drops a transition fails this test until the page
is generated again."""

from __future__ import annotations

import psycopg

from tests.docs.state_diagrams import COMMAND, PAGE, render


def test_the_committed_state_diagrams_match_a_migrated_database(fresh_db) -> None:
    with psycopg.connect(fresh_db.owner) as conn:
        want = render(conn)
    have = PAGE.read_text(encoding="utf-8") if PAGE.exists() else ""
    assert have == want, f"{PAGE.name} differs from allowed_transitions: run `{COMMAND}`"


def test_the_page_draws_every_transition(fresh_db) -> None:
    with psycopg.connect(fresh_db.owner) as conn:
        rows = conn.execute(
            "SELECT kind, from_state, to_state FROM mdame.allowed_transitions"
        ).fetchall()
        page = render(conn)
        # A transition added in the database shows up in the page drawn from it.
        conn.execute("INSERT INTO mdame.work_states VALUES ('script', 'parked', false)")
        conn.execute(
            "INSERT INTO mdame.allowed_transitions VALUES ('script', 'approved', 'parked')"
        )
        changed = render(conn)
    assert rows
    for kind, src, dst in rows:
        section = page.split(f"\n## {kind}\n", 1)[1].split("\n## ", 1)[0]
        assert f"    {src} --> {dst}\n" in section
    assert "    approved --> parked\n" in changed and changed != page
