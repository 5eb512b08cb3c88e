"""An account's quota day is in a real time zone: the names the server knew at migrate are an
index probe (mdame.time_zones), a name the server learnt since (a newer tzdata) is still
accepted from its own list, and anything else is refused, naming the zone."""

from __future__ import annotations

import pytest

from mdame_core.state import InvalidInput
from tests.adminkit import as_admin


def test_the_servers_zones_are_read_at_migrate(owner) -> None:
    (missing,) = owner.execute(
        """SELECT count(*) FROM pg_timezone_names n
            WHERE NOT EXISTS (SELECT FROM mdame.time_zones z WHERE z.name = n.name)"""
    ).fetchone()
    assert missing == 0
    assert owner.execute(
        "SELECT mdame._is_time_zone('Europe/Berlin'), mdame._is_time_zone('UTC+5'),"
        " mdame._is_time_zone(NULL)"
    ).fetchone() == (True, False, False)


def test_a_zone_learnt_after_migrate_is_accepted_and_a_wrong_one_refused(state, owner) -> None:
    admin = as_admin(state)
    admin.upsert_dimension("tech", "Tech")
    owner.execute("DELETE FROM mdame.time_zones WHERE name = 'Asia/Kathmandu'")
    account = admin.upsert_dimension_account(
        "tech", "youtube", "@tech", 10_000, quota_timezone="Asia/Kathmandu"
    )
    assert owner.execute(
        "SELECT quota_timezone FROM mdame.dimension_accounts WHERE id = %s", [account]
    ).fetchone() == ("Asia/Kathmandu",)

    with pytest.raises(InvalidInput, match="Mars/Olympus"):
        admin.upsert_dimension_account(
            "tech", "youtube", "@tech", 10_000, quota_timezone="Mars/Olympus"
        )
    assert owner.execute(
        "SELECT quota_timezone FROM mdame.dimension_accounts WHERE id = %s", [account]
    ).fetchone() == ("Asia/Kathmandu",)
