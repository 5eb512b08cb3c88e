"""Sensors that carry a partition across the code-location hop, read from PostgreSQL.

A run cannot span two code locations, so the state machine in PostgreSQL is the hand-off:
scripts in 'planned' need the GPU location; scripts past 'visuals_ready' need publishing.
A run_key made of the partition and the newest update means one run per change; a partition
that makes no progress for STALL_RETRY_S gets a fresh run_key, so crashed work is retried.
"""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg

from mdame_assets.jobs import partition_tags
from mdame_assets.lifecycle import script_states
from mdame_assets.partitions import partition_key
from mdame_core.state import PartitionWork

STALL_RETRY_S = 1800
AWAITING_CLIPS = ("planned",)
AWAITING_PUBLISHING = script_states("visuals_ready", "publishing")


def run_requests(prefix: str, work: list[PartitionWork]) -> list[dg.RunRequest]:
    now = datetime.now(UTC)
    requests = []
    for item in work:
        key = str(partition_key(item.partition_date, item.dimension_slug))
        retry = int((now - item.last_update).total_seconds() // STALL_RETRY_S)
        requests.append(
            dg.RunRequest(
                run_key=f"{prefix}:{key}:{item.last_update.isoformat()}:{retry}",
                partition_key=key,
                tags=partition_tags(key),
            )
        )
    return requests
