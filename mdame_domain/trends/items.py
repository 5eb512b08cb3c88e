"""A feed item (TrendItem) and FeedError, the error of a feed that cannot be read."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class TrendItem:
    source: str
    title: str
    url: str
    summary: str
    published_at: datetime | None
    guid: str


class FeedError(ValueError):
    """A feed that cannot be read; the message names the feed source and what is wrong."""

    def __init__(self, source: str, problem: str) -> None:
        super().__init__(f"feed {source!r}: {problem}")
        self.source = source
        self.problem = problem
