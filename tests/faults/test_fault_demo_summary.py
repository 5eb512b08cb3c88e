"""`make demo`'s summary reads publications from the database: a partition right before
publishing (the shared `rendered` rig) is counted once its video is published, and one held
back by an account that needs re-authorization says so, with exit status 1."""

from __future__ import annotations

from faultkit import DIMENSION, KEY, seeding

from mdame_assets.defs.publications.assets import publications
from mdame_cli.demo import partition_facts, summary
from mdame_cli.runs import Outcome

OK = Outcome(KEY, True, 1.0, {})


def test_a_published_video_is_counted_from_the_database(rig):
    assert rig.materialize([publications]).success

    facts = partition_facts(rig.state, OK)

    assert facts.videos == 1
    lines, code = summary([facts], [], 1.0, "/outbox")
    assert code == 0
    assert lines == ["1/1 dimensions published (1 video) in 1.0s; videos are under /outbox"]


def test_an_account_needing_reauth_holds_the_partition_back(rig):
    [account] = rig.state.list_accounts(DIMENSION)
    with seeding(rig.state) as fenced:
        fenced.mark_needs_reauth(account.id, "invalid_grant")
    assert rig.materialize([publications]).success  # skipped, not failed: nothing half done

    facts = partition_facts(rig.state, OK)

    lines, code = summary([facts], [], 1.0, "/outbox")
    assert lines[0].startswith("0/1 dimensions published (0 videos)")
    assert lines[1] == (
        f"  {DIMENSION}: not published: account skipped: {account.handle} (needs reauth) "
        "may not be published to now"
    )
    assert lines[-1] == f"held back: {DIMENSION} (see above; exit status 1)" and code == 1
