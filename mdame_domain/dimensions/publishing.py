"""Where a dimension's videos and alerts go: its publishing accounts (`accounts:`), the
metadata every video gets on YouTube (`youtube:`), TikTok (`tiktok:`) and Instagram
(`instagram:`), and the Telegram chat of its alerts (`alerts:`), each with its validating
reader."""

from __future__ import annotations

import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from mdame_domain.dimensions.constants import (
    DAILY_POSTS,
    DEFAULT_QUOTA_TIMEZONE,
    PLATFORMS,
    RETIRED_PLATFORMS,
)
from mdame_domain.dimensions.reader import _Reader


@dataclass(frozen=True)
class PublishingAccount:
    platform: str
    handle: str
    daily_quota_units: int
    quota_timezone: str = DEFAULT_QUOTA_TIMEZONE
    # The uploads the account may start a quota day (the ledger's insert bucket).
    daily_posts: int = 100


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


def _hashtags(r: _Reader, raw: Mapping[str, Any], name: str) -> tuple[str, ...] | None:
    """A block's `hashtags` (None when not given): one word each, nothing to contact."""
    from mdame_domain.published_text import contact_detail_problem

    if "hashtags" not in raw:
        return None
    values = raw["hashtags"]
    if not isinstance(values, list) or not all(isinstance(v, str) and v.strip() for v in values):
        raise r.fail(f"{name}.hashtags", "expected a list of non-empty strings")
    if any(" " in h or "#" in h.lstrip("#") for h in values):
        raise r.fail(f"{name}.hashtags", "a hashtag is one word, like 'science'")
    for value in values:
        problem = contact_detail_problem(value)
        if problem:
            raise r.fail(f"{name}.hashtags", f"{value!r} {problem}")
    return tuple(values)


def _flags(r: _Reader, raw: Mapping[str, Any], name: str, defaults: Mapping[str, bool]) -> dict:
    found = {}
    for key, default in defaults.items():
        value = raw.get(key, default)
        if not isinstance(value, bool):
            raise r.fail(f"{name}.{key}", "expected true or false")
        found[key] = value
    return found


# TikTok publishing: the `tiktok:` mapping of a dimension file.
@dataclass(frozen=True)
class TikTokSettings:
    """What every TikTok post of the dimension gets. privacy_level None: the youtube privacy in
    TikTok's terms (public: PUBLIC_TO_EVERYONE, private: SELF_ONLY); it must be one the
    creator's account allows (an unaudited app: SELF_ONLY). hashtags None: youtube.hashtags.
    The AI-generated content label follows flags.synthetic_media."""

    privacy_level: str | None = None
    disable_comment: bool = False
    disable_duet: bool = False
    disable_stitch: bool = False
    hashtags: tuple[str, ...] | None = None


def _tiktok(r: _Reader) -> TikTokSettings:
    from mdame_domain.tiktok import PRIVACY_LEVELS

    raw = r.get("tiktok", Mapping, {})
    toggles = {"disable_comment": False, "disable_duet": False, "disable_stitch": False}
    unknown = set(raw) - {"privacy_level", "hashtags", *toggles}
    if unknown:
        raise r.fail(f"tiktok.{sorted(unknown)[0]}", "is not a tiktok setting")
    level = raw.get("privacy_level")
    if level is not None and level not in PRIVACY_LEVELS:
        raise r.fail("tiktok.privacy_level", f"must be one of {', '.join(PRIVACY_LEVELS)}")
    return TikTokSettings(
        level, **_flags(r, raw, "tiktok", toggles), hashtags=_hashtags(r, raw, "tiktok")
    )


# Instagram publishing: the `instagram:` mapping of a dimension file.
@dataclass(frozen=True)
class InstagramSettings:
    """What every reel of the dimension gets. share_to_feed: shown in the account's feed too,
    not only in the Reels tab. hashtags None: youtube.hashtags. (The Instagram API has no AI
    label to set: Meta labels AI content itself.)"""

    share_to_feed: bool = True
    hashtags: tuple[str, ...] | None = None


def _instagram(r: _Reader) -> InstagramSettings:
    raw = r.get("instagram", Mapping, {})
    unknown = set(raw) - {"share_to_feed", "hashtags"}
    if unknown:
        raise r.fail(f"instagram.{sorted(unknown)[0]}", "is not an instagram setting")
    flags = _flags(r, raw, "instagram", {"share_to_feed": True})
    return InstagramSettings(**flags, hashtags=_hashtags(r, raw, "instagram"))


def post_settings(settings: TikTokSettings | InstagramSettings) -> tuple[tuple[str, Any], ...]:
    """A platform block's post settings as the video metadata carries them: every setting but
    its hashtags (they go into the caption), unset ones left out."""
    return tuple(
        (name, value)
        for name, value in asdict(settings).items()
        if name != "hashtags" and value is not None
    )


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
    accounts: list[PublishingAccount] = []
    for i, item in enumerate(r.get("accounts", list)):
        name = f"accounts[{i}]"
        if not isinstance(item, Mapping):
            raise r.fail(name, "expected a mapping with platform, handle, daily_quota_units")
        unknown = set(item) - {
            "platform",
            "handle",
            "daily_quota_units",
            "quota_timezone",
            "daily_posts",
        }
        if unknown:
            raise r.fail(f"{name}.{sorted(unknown)[0]}", "is not an account setting")
        platform = item.get("platform")
        if isinstance(platform, str) and platform in RETIRED_PLATFORMS:
            raise r.fail(f"{name}.platform", RETIRED_PLATFORMS[platform])
        if platform not in PLATFORMS:
            raise r.fail(f"{name}.platform", f"must be one of {', '.join(PLATFORMS)}")
        for j, earlier in enumerate(accounts):
            if earlier.platform == platform:
                raise r.fail(
                    f"{name}.platform",
                    f"{platform} already has an account (accounts[{j}]): a dimension publishes "
                    "to one account per platform",
                )
        handle = item.get("handle")
        if not isinstance(handle, str) or not handle:
            raise r.fail(f"{name}.handle", "is required")
        counts = {}
        for key, default in (
            ("daily_quota_units", 10_000),
            ("daily_posts", DAILY_POSTS[platform]),
        ):
            value = item.get(key, default)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise r.fail(f"{name}.{key}", "expected a non-negative integer")
            counts[key] = value
        timezone = item.get("quota_timezone", DEFAULT_QUOTA_TIMEZONE)
        if not _is_time_zone(timezone):
            raise r.fail(f"{name}.quota_timezone", "expected an IANA time zone like 'UTC'")
        accounts.append(
            PublishingAccount(
                platform, handle, counts["daily_quota_units"], timezone, counts["daily_posts"]
            )
        )
    if not accounts:
        raise r.fail("accounts", "needs at least one publishing account")
    return tuple(accounts)


def _publish_to(r: _Reader, accounts: tuple[PublishingAccount, ...]) -> tuple[str, ...]:
    """The platforms the dimension publishes to (`publish_to`), each with its account; absent:
    every account's. An account whose platform is not listed stays registered (its grant
    kept) but publishes nothing."""
    have = [a.platform for a in accounts]
    if "publish_to" not in r.data:
        return tuple(have)
    wanted = r.strings("publish_to", [])
    if not wanted:
        raise r.fail("publish_to", "needs a platform; to stop the dimension, set active: false")
    for platform in wanted:
        if platform in RETIRED_PLATFORMS:
            raise r.fail("publish_to", RETIRED_PLATFORMS[platform])
        if platform not in PLATFORMS:
            raise r.fail("publish_to", f"{platform!r} is not a platform ({', '.join(PLATFORMS)})")
        if platform not in have:
            raise r.fail(
                "publish_to", f"{platform} has no account: add one to accounts ({platform}, handle)"
            )
    return tuple(dict.fromkeys(wanted))


def _is_time_zone(name: Any) -> bool:
    if not isinstance(name, str) or not name:
        return False
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return False
    return True
