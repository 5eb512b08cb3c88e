"""Analytics: what viewers did with the published videos.

Plain functions: batching ids for the channel's list call, parsing its statistics, and the
offline channel's seeded audience model (so the weekly report and the Adaptive Engine have
views to work with when nothing is really published).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import date
from typing import Any

# videos.list takes at most 50 ids per call, and costs 1 quota unit per call.
VIDEOS_PER_LIST_CALL = 50
LIST_CALL_UNITS = 1


@dataclass(frozen=True)
class VideoCounters:
    views: int
    likes: int
    comments: int

    def as_item(self, publication_id: int) -> dict[str, int]:
        """The record_video_stats item of this publication."""
        return {
            "publication_id": publication_id,
            "views": self.views,
            "likes": self.likes,
            "comments": self.comments,
        }


def batches(ids: Sequence[str], size: int = VIDEOS_PER_LIST_CALL) -> Iterator[list[str]]:
    """`ids` (duplicates dropped, order kept) in lists of at most `size`."""
    if size < 1:
        raise ValueError("batch size must be at least 1")
    unique = list(dict.fromkeys(ids))
    for start in range(0, len(unique), size):
        yield unique[start : start + size]


def quota_units(video_count: int) -> int:
    """Units one read of `video_count` videos costs: 1 per list call of up to 50 ids."""
    return math.ceil(video_count / VIDEOS_PER_LIST_CALL) * LIST_CALL_UNITS


def _count(raw: Mapping[str, Any], key: str) -> int:
    # The API sends counters as decimal strings; a hidden counter (likes disabled) is absent.
    value = raw.get(key, 0)
    try:
        number = int(value)
    except (TypeError, ValueError):
        raise ValueError(f"statistics.{key} is not a count: {value!r}") from None
    if number < 0:
        raise ValueError(f"statistics.{key} is negative: {number}")
    return number


def parse_statistics(items: Sequence[Mapping[str, Any]]) -> dict[str, VideoCounters]:
    """video id -> counters from a videos.list(part="statistics") answer's items."""
    out: dict[str, VideoCounters] = {}
    for item in items:
        stats = item.get("statistics")
        if not isinstance(stats, Mapping):
            raise ValueError(f"video {item.get('id')!r} came back without statistics")
        out[str(item["id"])] = VideoCounters(
            _count(stats, "viewCount"), _count(stats, "likeCount"), _count(stats, "commentCount")
        )
    return out


def _unit(seed: bytes, label: str) -> float:
    """A deterministic number in [0, 1) from the seed and a label."""
    digest = hashlib.sha256(seed + b"|" + label.encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def simulated_counters(video_id: str, published: date, day: date) -> VideoCounters:
    """The offline channel's counters of a video on `day`: deterministic from the video id and
    the day. Each video draws an audience size (log-uniform, 300 to 30,000 views at saturation),
    a growth time constant (1 to 4 days) and a like rate (2 to 8 %); views follow a saturating
    curve with a small daily wobble that never makes a counter go down."""
    if day < published:
        return VideoCounters(0, 0, 0)
    seed = video_id.encode()
    audience = 300 * 100 ** _unit(seed, "audience")
    tau = 1.0 + 3.0 * _unit(seed, "tau")
    like_rate = 0.02 + 0.06 * _unit(seed, "likes")
    comment_rate = 0.002 + 0.008 * _unit(seed, "comments")
    age = (day - published).days + 1  # observed at the end of its first day: age 1
    # The wobble rides on the curve of the day before, so views stay non-decreasing.
    previous = audience * (1 - math.exp(-(age - 1) / tau))
    current = audience * (1 - math.exp(-age / tau))
    wobble = 0.7 + 0.6 * _unit(seed, f"day:{day.isoformat()}")
    views = int(previous + (current - previous) * wobble)
    return VideoCounters(views, int(views * like_rate), int(views * comment_rate))
