"""What the YouTube fake remembers (one JSON file, bytes beside it), and its quota counters."""

from __future__ import annotations

from pathlib import Path

from fakes.common import JsonState
from fakes.youtube.protocol import DEFAULT_LIMITS, quota_day


class State(JsonState):
    """Channels, tokens, sessions, videos and quota counters (bytes in files beside them)."""

    def defaults(self) -> None:
        for key in ("channels", "tokens", "sessions", "videos", "counters"):
            self.data.setdefault(key, {})
        self.data.setdefault("limits", dict(DEFAULT_LIMITS))
        self.data.setdefault("requests", [])
        self.data.setdefault("initiations", [])
        self.data.setdefault("unauthorized", [])  # the kinds of the requests answered 401
        self.data.setdefault("spared", [])  # tokens issued after an early expiry, unused yet

    def blob(self, upload_id: str) -> Path:
        return self.folder / "bytes" / f"{upload_id}.bin"

    def charge(self, channel: str, bucket: str, cost: int) -> bool:
        """Adds `cost` to today's bucket; False (nothing added) when it does not fit."""
        day = self.data["counters"].setdefault(quota_day(), {})
        used = day.setdefault(channel, {"insert": 0, "search": 0, "units": 0})
        if used[bucket] + cost > self.data["limits"][bucket]:
            return False
        used[bucket] += cost
        return True

    def left(self, channel: str, bucket: str) -> int:
        day = self.data["counters"].get(quota_day(), {})
        used = day.get(channel, {}).get(bucket, 0)
        return int(self.data["limits"][bucket] - used)
