"""video_stats: each published video's counters of the day, read from its channel.

Partitioned like the content stages (day x dimension), so a dimension's analytics sit next to
its content in the UI and a backfill reads a range of days for one dimension. It writes through
record_video_stats (idempotent per publication and day) and charges list calls to the quota
ledger, both under the dimension's pipeline lock (a busy lock is retried by the job's
RetryPolicy, like any stage's).
"""

from collections import defaultdict

import dagster as dg

from mdame_assets.partitions import content_partitions
from mdame_core.state import Account, PublishedVideo
from mdame_domain.analytics import VideoCounters, quota_units
from mdame_pipeline.locks import held_lock
from mdame_resources.providers.publisher import (
    AccountUnavailable,
    PublisherResource,
    StatisticsUnavailable,
    publisher_for,
)
from mdame_resources.state import StateStoreResource
from mdame_runtime.partition_keys import PartitionRef

ANALYTICS_GROUP = "operations"
BATCH = 1000  # record_video_stats' limit per call


@dg.asset(
    partitions_def=content_partitions,
    group_name=ANALYTICS_GROUP,
    deps=[dg.AssetKey("publications")],
    kinds={"youtube", "postgres"},
    description="Views, likes and comments of every published video, read once a day.",
)
def video_stats(
    context: dg.AssetExecutionContext,
    state: StateStoreResource,
    youtube_publisher: PublisherResource,
    tiktok_publisher: PublisherResource,
    instagram_publisher: PublisherResource,
) -> dg.MaterializeResult:
    partition = PartitionRef.of(context)
    client = state.get_client()
    dimension = client.get_dimension(partition.dimension)
    if dimension is None:
        raise dg.Failure(
            f"dimension {partition.dimension!r} is not in the registry", allow_retries=False
        )
    videos = client.published_videos(dimension.id, partition.day)
    accounts = {a.id: a for a in client.list_accounts(partition.dimension)}
    by_account: dict[int, list[PublishedVideo]] = defaultdict(list)
    for video in videos:
        by_account[video.account_id].append(video)

    items: list[dict[str, int]] = []
    skipped: dict[str, str] = {}
    units = 0
    # The reads are charged to each account's quota ledger, and the counters written, under the
    # dimension's lock.
    with held_lock(client, partition.dimension, f"{context.run.run_id}:video_stats") as held:
        for account_id, account_videos in by_account.items():
            account: Account = accounts[account_id]
            wanted = {v.video_id: v.partition_date for v in account_videos}
            channel = publisher_for(
                account.platform,
                {
                    "youtube": youtube_publisher,
                    "tiktok": tiktok_publisher,
                    "instagram": instagram_publisher,
                },
            )
            try:
                counters = channel.video_statistics(
                    held, account, partition.dimension, wanted, partition.day
                )
            except (AccountUnavailable, StatisticsUnavailable) as exc:
                # No grant, an exhausted quota, an API error: this account's numbers wait for the
                # next read; the other accounts' still count.
                skipped[account.handle] = str(exc)[:300]
                continue
            if not channel.offline:
                units += quota_units(len(wanted))
            items += [
                counters.get(v.video_id, VideoCounters(0, 0, 0)).as_item(v.publication_id)
                for v in account_videos
                if v.video_id in counters
            ]
        written = 0
        for start in range(0, len(items), BATCH):
            written += held.record_video_stats(partition.day, items[start : start + BATCH])
    context.log.info(
        f"video_stats {partition.key}: {written} of {len(videos)} videos read"
        + (f"; skipped accounts: {sorted(skipped)}" if skipped else "")
    )
    return dg.MaterializeResult(
        metadata={
            "videos": len(videos),
            "recorded": written,
            "views": sum(i["views"] for i in items),
            "likes": sum(i["likes"] for i in items),
            "quota_units": units,
            "channel": youtube_publisher.provider_name,
            "skipped_accounts": dg.MetadataValue.json(skipped),
        }
    )
