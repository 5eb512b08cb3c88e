"""What the Instagram fake remembers (one JSON file, bytes beside it), and a container's status."""

from __future__ import annotations

import secrets
from pathlib import Path
from typing import Any

from fakes.common import JsonState
from fakes.instagram.protocol import (
    CONTAINER_LIFETIME,
    DEFAULT_PROCESSING_DELAY,
    PUBLISH_LIMIT,
    PUBLISH_WINDOW,
)


class State(JsonState):
    """Accounts, tokens, containers, media, publishes and insights (bytes in files beside them)."""

    def defaults(self) -> None:
        for key in ("accounts", "tokens", "containers", "media", "publishes", "insights"):
            self.data.setdefault(key, {})
        self.data.setdefault("requests", [])
        self.data.setdefault("calls", [])
        self.data.setdefault("unauthorized", [])  # the kinds of the requests refused a token
        self.data.setdefault("refused", [])  # their request lines, as "requests" has them
        settings = self.data.setdefault("settings", {})
        settings.setdefault("processing_delay", DEFAULT_PROCESSING_DELAY)
        settings.setdefault("container_lifetime", CONTAINER_LIFETIME)
        settings.setdefault("publish_limit", PUBLISH_LIMIT)
        settings.setdefault("publish_window", PUBLISH_WINDOW)
        settings.setdefault("call_budget", None)

    def blob(self, container_id: str) -> Path:
        return self.folder / "bytes" / f"{container_id}.bin"

    def new_id(self, prefix: str, digits: int) -> str:
        taken = self.data["accounts"].keys() | self.data["containers"].keys()
        taken |= self.data["media"].keys()
        while True:
            candidate = prefix + str(secrets.randbelow(10**digits)).zfill(digits)
            if candidate not in taken:
                return candidate

    def publishes_since(self, ig_user_id: str, since: float) -> int:
        return sum(1 for t in self.data["publishes"].get(ig_user_id, []) if t > since)


def container_status(c: dict[str, Any], now: float, settings: dict[str, Any]) -> str:
    if c.get("media_id"):
        return "PUBLISHED"
    forced = c.get("forced")
    if forced is not None and now >= c.get("forced_at", 0.0):
        return str(forced)
    if now >= c["created"] + float(settings["container_lifetime"]):
        return "EXPIRED"
    ready = c.get("ready_at")
    if ready is None or now < ready:
        return "IN_PROGRESS"
    return "FINISHED"
