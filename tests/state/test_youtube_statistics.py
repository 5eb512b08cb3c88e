"""Analytics against the local YouTube server: videos.list(part="statistics") in calls of 50
ids through the real google-api-python-client, each call charged 1 unit in the quota ledger."""

from __future__ import annotations

from datetime import date

import pytest
from youtube_kit import publisher, store_grant

from mdame_domain.analytics import VideoCounters
from mdame_domain.channel import ChannelError
from mdame_resources.providers.publisher import OutboxPublisher, StatisticsUnavailable
from tests.adminkit import as_admin
from tests.state.test_fencing import hold

DAY = date(2026, 11, 29)


def test_statistics_are_read_fifty_ids_a_call_and_charged(state, fake, master, tmp_path) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    [account] = state.list_accounts("tech")
    store_grant(state, account, master)
    [channel] = fake.snapshot()["channels"]
    ids = [fake.add_video(channel, f"video {i}") for i in range(60)]
    for i, vid in enumerate(ids):
        fake.set_statistics(vid, views=100 + i, likes=i, comments=1)
    pub = publisher(fake, tmp_path)

    held = hold(state, "tech")  # the reads are charged under the dimension's lock
    got = pub.video_statistics(held, account, "tech", dict.fromkeys(ids, DAY), DAY)
    assert got[ids[7]] == VideoCounters(107, 7, 1) and len(got) == 60
    assert fake.counters(channel)["units"] == 2  # two calls: 50 ids, then 10
    lists = [r for r in fake.requests() if "/youtube/v3/videos?" in r and "statistics" in r]
    assert len(lists) == 2
    assert state.bucket_usage(account.id)["units"] == (0, 2)  # committed in the ledger

    with pytest.raises(ChannelError, match="HTTP 400"):  # why the reads are batched
        pub.channel(state, account, "tech").videos(ids[:51], "statistics")

    fake.faults.push("list_quota_exceeded")  # the channel refuses: released, not charged
    with pytest.raises(StatisticsUnavailable, match="quotaExceeded"):
        pub.video_statistics(held, account, "tech", {ids[0]: DAY}, DAY)
    assert state.bucket_usage(account.id)["units"] == (0, 2)


def test_an_exhausted_ledger_stops_the_read_before_the_call(state, fake, master, tmp_path) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 1)  # one unit a day
    [account] = state.list_accounts("tech")
    store_grant(state, account, master)
    [channel] = fake.snapshot()["channels"]
    ids = [fake.add_video(channel, f"video {i}") for i in range(51)]
    with pytest.raises(StatisticsUnavailable, match="quota"):
        publisher(fake, tmp_path).video_statistics(
            hold(state, "tech"), account, "tech", dict.fromkeys(ids, DAY), DAY
        )
    assert fake.counters(channel)["units"] == 1  # the second call was never sent


def test_the_outbox_channel_simulates_viewers(state) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    [account] = state.list_accounts("tech")
    got = OutboxPublisher().video_statistics(
        state, account, "tech", {"outbox-1": date(2026, 11, 27)}, DAY
    )
    assert got["outbox-1"].views > got["outbox-1"].likes > 0
    assert state.bucket_usage(account.id) == {}  # not a metered channel
