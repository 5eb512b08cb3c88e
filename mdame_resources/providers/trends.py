"""Trend sources: sample feed files shipped in the repo, or live feed URLs; one parser for both."""

from __future__ import annotations

import urllib.request
from pathlib import Path

from mdame_core.settings import REPO_ROOT
from mdame_domain.trends import FeedError, TrendItem, parse_feed
from mdame_resources.providers.base import ProviderResource


class TrendSourceResource(ProviderResource):
    def read(self, feed: str) -> list[TrendItem]:
        raise NotImplementedError


class FeedFileTrendSource(TrendSourceResource):
    """Offline: feed files relative to the repository (or absolute paths)."""

    base_dir: str = ""

    @property
    def offline(self) -> bool:
        return True

    def read(self, feed: str) -> list[TrendItem]:
        path = Path(feed) if Path(feed).is_absolute() else Path(self.base_dir or REPO_ROOT) / feed
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise FeedError(feed, f"cannot read file ({exc.strerror})") from exc
        return parse_feed(text, feed)


class HttpFeedTrendSource(TrendSourceResource):
    """Production: RSS/Atom/JSON feeds over HTTP(S), parsed by the same parser."""

    timeout_s: float = 20.0
    user_agent: str = "mdame/0.1 (+feed reader)"

    def read(self, feed: str) -> list[TrendItem]:
        request = urllib.request.Request(feed, headers={"User-Agent": self.user_agent})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                text = response.read(5_000_000).decode("utf-8", errors="replace")
        except OSError as exc:
            raise FeedError(feed, f"fetch failed ({exc})") from exc
        return parse_feed(text, feed)
