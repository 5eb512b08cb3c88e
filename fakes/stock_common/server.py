"""A stock API's server: its state (the rate window, the limits, the requests seen), its
faults and keys, what a test sets up on it and reads back."""

from __future__ import annotations

import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any

from fakes.common import JsonState, LocalServer, NamedFaults
from fakes.stock_common.files import temporary
from fakes.stock_common.footage import Footage, Slot, catalogue
from fakes.stock_common.handler import StockHandler

FAULTS: dict[str, str] = {
    "rate_limited": "search",
    "server_error": "any",
    "drop": "any",
    "bad_key": "search",
    "wrong_type": "file",
    "oversize": "file",
    "truncate": "file",
    "slow": "any",
}


class StockState(JsonState):
    """The rate window, the limits and the requests seen (never a key)."""

    def defaults(self) -> None:
        self.data.setdefault("limits", {})  # those set; the server's LIMITS for the rest
        self.data.setdefault("rate", {"start": 0.0, "used": 0})
        self.data.setdefault("requests", [])


class StockServer(LocalServer):
    """A stock API's server. Subclasses name the source, its search path and answer shapes."""

    state: StockState
    source = ""
    TEMPLATE: tuple[Slot, ...] = ()
    # API requests a window, and the window in seconds.
    LIMITS: dict[str, float] = {"rate_limit": 200, "rate_window": 3600.0}

    def __init__(self, state_dir: str | Path | None = None, port: int = 0, host: str = "127.0.0.1"):
        folder = Path(state_dir) if state_dir else temporary(f"mdame-fake-{self.source}-")
        self.state = StockState(folder)
        self.state.load()
        self.faults = NamedFaults(FAULTS)
        self.clock: Callable[[], float] = time.time
        self.keys: set[str] | None = None  # None: any non-empty key
        self.empty = False  # every search finds nothing
        self.off_topic_first: bool | None = None  # None: by the query's hash
        super().__init__(host, port)

    # -- set-up ------------------------------------------------------------------------
    def set_limits(self, **limits: Any) -> None:
        unknown = set(limits) - set(self.LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}; known: {sorted(self.LIMITS)}")
        with self.state.lock:
            self.state.data["limits"].update(limits)
            self.state.save()

    def _limit(self, name: str) -> float:
        with self.state.lock:
            return float(self.state.data["limits"].get(name, self.LIMITS[name]))

    @property
    def rate_limit(self) -> int:
        return int(self._limit("rate_limit"))

    @property
    def rate_window(self) -> float:
        return self._limit("rate_window")

    def clear_faults(self) -> None:
        self.faults.clear()

    def catalogue(self, query: str) -> list[Footage]:
        return (
            [] if self.empty else catalogue(self.source, query, self.TEMPLATE, self.off_topic_first)
        )

    def link(self, path: str) -> str:
        return self.base_url + path

    # -- what it saw -------------------------------------------------------------------
    def requests(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return [dict(r) for r in self.state.data["requests"]]

    def counters(self) -> dict[str, Any]:
        """API searches and file downloads seen, and the statuses answered ("0": none)."""
        seen = self.requests()
        by_status: dict[str, int] = {}
        for r in seen:
            by_status[str(r["status"])] = by_status.get(str(r["status"]), 0) + 1
        return {
            "search": sum(1 for r in seen if r["kind"] == "search"),
            "file": sum(1 for r in seen if r["kind"] == "file"),
            "by_status": by_status,
        }

    def record(self, kind: str, path: str, query: str) -> dict[str, Any]:
        """Counts a request as it arrives, before any answer: a client that has its answer
        finds it counted. Its status ("0" until answered) is set by `answered`."""
        entry: dict[str, Any] = {"kind": kind, "path": path, "query": query, "status": 0}
        with self.state.lock:
            self.state.data["requests"].append(entry)
            self.state.save()
        return entry

    def answered(self, entry: dict[str, Any], status: int) -> None:
        with self.state.lock:
            entry["status"] = status
            self.state.save()

    # -- the rate window ---------------------------------------------------------------
    def take_request(self) -> tuple[bool, int, float]:
        """Counts an API request in the window: (allowed, remaining, the window's end)."""
        now = self.clock()
        with self.state.lock:
            rate = self.state.data["rate"]
            if now >= rate["start"] + self.rate_window:
                rate["start"], rate["used"] = now, 0
            end = rate["start"] + self.rate_window
            if rate["used"] >= self.rate_limit:
                self.state.save()
                return False, 0, end
            rate["used"] += 1
            self.state.save()
            return True, self.rate_limit - rate["used"], end

    def reset_header(self, window_end: float) -> str:
        """X-Ratelimit-Reset as the source writes it (a Unix time, or seconds left)."""
        raise NotImplementedError

    def rate_headers(self, remaining: int, window_end: float) -> dict[str, str]:
        return {
            "X-Ratelimit-Limit": str(self.rate_limit),
            "X-Ratelimit-Remaining": str(max(0, remaining)),
            "X-Ratelimit-Reset": self.reset_header(window_end),
        }

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return StockHandler


def environ_for(*servers: StockServer) -> dict[str, str]:
    """The endpoint variables (MDAME_PEXELS_URL, MDAME_PIXABAY_URL) that point the stock
    provider at these servers."""
    return {f"MDAME_{s.source.upper()}_URL": s.base_url.rstrip("/") for s in servers}
