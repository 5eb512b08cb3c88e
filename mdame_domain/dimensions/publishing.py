"""Where a dimension's videos and alerts go: its publishing accounts (`accounts:`), the YouTube
metadata every video gets (`youtube:`) and the Telegram chat of its alerts (`alerts:`), each
with its validating reader."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mdame_domain.dimensions.constants import DEFAULT_QUOTA_TIMEZONE, PLATFORMS
from mdame_domain.dimensions.reader import _Reader


@dataclass(frozen=True)
class PublishingAccount:
    platform: str
    handle: str
    daily_quota_units: int
    quota_timezone: str = DEFAULT_QUOTA_TIMEZONE


# YouTube publishing: the `youtube:` mapping of a dimension file.
@dataclass(frozen=True)
class YouTubeSettings:
    """Video metadata every video of the dimension gets (validated again before upload).
    tags: None means the dimension's keywords."""

    category_id: str = "28"  # Science & Technology
    privacy_status: str = "public"
    notify_subscribers: bool = False
    hashtags: tuple[str, ...] = ()
    tags: tuple[str, ...] | None = None


def _youtube(r: _Reader) -> YouTubeSettings:
    from mdame_domain.published_text import contact_detail_problem
    from mdame_domain.video_metadata import CATEGORIES, PRIVACY

    raw = r.get("youtube", Mapping, {})
    sub = _Reader(raw, f"{r.source} (youtube)")
    unknown = set(raw) - {"category_id", "privacy_status", "notify_subscribers", "hashtags", "tags"}
    if unknown:
        raise r.fail(f"youtube.{sorted(unknown)[0]}", "is not a youtube setting")
    category = str(sub.get("category_id", (str, int), "28"))
    if category not in CATEGORIES:
        raise r.fail("youtube.category_id", f"must be one of {', '.join(sorted(CATEGORIES))}")
    privacy = sub.get("privacy_status", str, "public")
    if privacy not in PRIVACY:
        raise r.fail("youtube.privacy_status", f"must be one of {', '.join(PRIVACY)}")
    notify = raw.get("notify_subscribers", False)
    if not isinstance(notify, bool):
        raise r.fail("youtube.notify_subscribers", "expected true or false")
    lists: dict[str, tuple[str, ...]] = {}
    for name in ("hashtags", "tags"):
        values = raw.get(name, [])
        if not isinstance(values, list) or not all(
            isinstance(v, str) and v.strip() for v in values
        ):
            raise r.fail(f"youtube.{name}", "expected a list of non-empty strings")
        lists[name] = tuple(values)
    hashtags = lists["hashtags"]
    tags = lists["tags"] if "tags" in raw else None
    if any(" " in h or "#" in h.lstrip("#") for h in hashtags):
        raise r.fail("youtube.hashtags", "a hashtag is one word, like 'science'")
    # Published as written on every video: a link or handle here is refused, not stripped.
    # Without youtube.tags the keywords are the tags.
    published = {"youtube.hashtags": hashtags}
    published["youtube.tags" if tags is not None else "keywords"] = (
        tags if tags is not None else r.strings("keywords", [])
    )
    for name, values in published.items():
        for value in values:
            problem = contact_detail_problem(value)
            if problem:
                raise r.fail(name, f"{value!r} {problem}")
    return YouTubeSettings(category, privacy, notify, hashtags, tags)


# --- alerts: the `alerts:` mapping of a dimension file ----------
# telegram_chat: the Telegram chat this dimension's alerts and reports go to (a numeric chat id,
# negative for groups and channels, or "@channelusername"); empty: MDAME_TELEGRAM_CHAT_ID.
TELEGRAM_CHAT_PATTERN = re.compile(r"^(-?\d{1,20}|@[A-Za-z][A-Za-z0-9_]{4,31})$")


@dataclass(frozen=True)
class AlertSettings:
    telegram_chat: str = ""


def _alert_settings(r: _Reader) -> AlertSettings:
    raw = r.get("alerts", Mapping, {})
    unknown = set(raw) - {"telegram_chat"}
    if unknown:
        raise r.fail(f"alerts.{sorted(unknown)[0]}", "is not an alerts setting")
    chat = raw.get("telegram_chat", "")
    if isinstance(chat, int) and not isinstance(chat, bool):
        chat = str(chat)
    if not isinstance(chat, str) or (chat and not TELEGRAM_CHAT_PATTERN.match(chat)):
        raise r.fail(
            "alerts.telegram_chat",
            "expected a Telegram chat id like -1001234567890 or a channel like '@mdame_alerts'",
        )
    return AlertSettings(chat)


def _accounts(r: _Reader) -> tuple[PublishingAccount, ...]:
    accounts = []
    for i, item in enumerate(r.get("accounts", list)):
        name = f"accounts[{i}]"
        if not isinstance(item, Mapping):
            raise r.fail(name, "expected a mapping with platform, handle, daily_quota_units")
        platform = item.get("platform")
        if platform not in PLATFORMS:
            raise r.fail(f"{name}.platform", f"must be one of {', '.join(PLATFORMS)}")
        handle = item.get("handle")
        if not isinstance(handle, str) or not handle:
            raise r.fail(f"{name}.handle", "is required")
        quota = item.get("daily_quota_units", 10_000)
        if not isinstance(quota, int) or isinstance(quota, bool) or quota < 0:
            raise r.fail(f"{name}.daily_quota_units", "expected a non-negative integer")
        timezone = item.get("quota_timezone", DEFAULT_QUOTA_TIMEZONE)
        if not _is_time_zone(timezone):
            raise r.fail(f"{name}.quota_timezone", "expected an IANA time zone like 'UTC'")
        accounts.append(PublishingAccount(platform, handle, quota, timezone))
    if not accounts:
        raise r.fail("accounts", "needs at least one publishing account")
    return tuple(accounts)


def _is_time_zone(name: Any) -> bool:
    if not isinstance(name, str) or not name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True
