"""What the TikTok fake remembers (one JSON file, bytes beside it), and its knobs kept there."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fakes.common import JsonState
from fakes.tiktok.protocol import DEFAULT_LIMITS


class State(JsonState):
    """Creators, tokens, publishes, videos and rate windows (upload bytes in files beside them)."""

    def defaults(self) -> None:
        for key in ("creators", "tokens", "codes", "publishes", "videos", "rate"):
            self.data.setdefault(key, {})
        self.data["limits"] = {**DEFAULT_LIMITS, **self.data.get("limits", {})}
        self.data.setdefault("requests", [])
        self.data.setdefault("throttled", {})
        self.data.setdefault("list_calls", {})  # open_id -> authenticated video list calls
        self.data.setdefault("unauthorized", [])  # the kinds of the requests answered 401

    def blob(self, publish_id: str) -> Path:
        return self.folder / "bytes" / f"{publish_id.replace('~', '_')}.bin"


class Knob:
    """A limit kept in the state (so it survives a restart), read and set as an attribute."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return obj.state.data["limits"][self.name]

    def __set__(self, obj: Any, value: Any) -> None:
        obj.set_limits(**{self.name: value})
