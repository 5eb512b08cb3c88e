"""The June-2026 quota model in the ledger: per account, per bucket, per Pacific quota day."""

from __future__ import annotations

from test_fencing import hold

from mdame_core.state import InvalidInput
from tests.adminkit import as_admin


def test_buckets_are_capped_separately_and_the_units_view_keeps_its_meaning(state) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    account = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 10)
    for i in range(100):  # videos.insert: 100 calls a day, whatever the units cap says
        assert as_admin(state).reserve_bucket_quota(account, "insert", 1, f"insert-{i}") is not None
    assert as_admin(state).reserve_bucket_quota(account, "insert", 1, "insert-100") is None
    assert as_admin(state).reserve_bucket_quota(account, "search", 100, "search-all") is not None
    assert as_admin(state).reserve_bucket_quota(account, "search", 1, "search-more") is None
    assert (
        as_admin(state).reserve_quota(account, 10, "units-all") is not None
    )  # the units bucket (cap 10)
    assert as_admin(state).reserve_bucket_quota(account, "units", 1, "units-more") is None
    usage = state.bucket_usage(account)
    assert usage == {"insert": (100, 0), "search": (100, 0), "units": (10, 0)}
    assert state.quota_usage(account).reserved_units == 10  # units only
    as_admin(state).release_quota("insert-0")
    assert as_admin(state).reserve_bucket_quota(account, "insert", 1, "insert-100") is not None


def test_a_paused_or_reauth_account_is_skipped_and_reserves_nothing(state, owner) -> None:
    a = hold(state, "tech")
    as_admin(state).upsert_dimension("tech", "Tech")
    account = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    until = a.pause_account(account, "quotaExceeded")
    # The next Pacific midnight: the quota day the channel resets on.
    midnight = owner.execute(
        "SELECT ((now() AT TIME ZONE 'America/Los_Angeles')::date + 1)::timestamp "
        "AT TIME ZONE 'America/Los_Angeles'"
    ).fetchone()[0]
    assert until == midnight
    status = state.account_status(account)
    assert status.pause_reason == "quotaExceeded" and not status.needs_reauth
    assert a.mark_needs_reauth(account, "invalid_grant") is True
    assert a.mark_needs_reauth(account, "invalid_grant") is False  # alerted once
    alerts = [e for e in state.list_events("account", account) if e.event == "alert"]
    assert len(alerts) == 1
    try:
        a.pause_account(account, "tired")
    except InvalidInput as exc:
        assert "reason" in exc.message
    else:
        raise AssertionError("an unknown pause reason was accepted")
