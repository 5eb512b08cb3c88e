"""A YouTube video's metadata, validated before anything is uploaded.

The limits are YouTube's: a title of at most 100 characters without '<' or '>', a description
of at most 5,000 bytes (hashtags included), tags of at most 500 characters in all (a tag with a
space counts its quotes), `publishAt` only for private videos. Every error names the field.

The description is the script's text, the stock footage's credits (mdame_domain/credits.py),
the hashtags and the publication marker. The credits are fitted to YouTube's 5,000 bytes and,
for a TikTok or Instagram post, to its caption's cap (`caption`), so that a caption made of the
title and the description is never cut inside a credit.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from mdame_domain.credits import Credit, with_credits

PRIVACY = ("public", "unlisted", "private")
# YouTube's assignable video categories (videoCategories.list, region US).
CATEGORIES = frozenset(
    {"1", "2", "10", "15", "17", "19", "20", "22", "23", "24", "25", "26", "27", "28", "29"}
)
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
MARKER_PREFIX = "mdame:"
POST_SETTINGS = "postSettings"  # the video resource's key of a platform's own post settings
_MARKER = re.compile(r"\[(" + re.escape(MARKER_PREFIX) + r"[^\]]+)\]")
DESCRIPTION_MAX_BYTES = 5000


@dataclass(frozen=True)
class TextCap:
    """A platform's cap on a post's one text field, in its own unit."""

    most: int
    unit: str = "characters"  # or "UTF-16 units"

    def length(self, text: str) -> int:
        if self.unit == "UTF-16 units":
            return len(text.encode("utf-16-le")) // 2
        return len(text)


# TikTok's post_info.title and Instagram's caption: 2,200 each, TikTok's in UTF-16 code units.
TIKTOK_CAPTION = TextCap(2200, "UTF-16 units")
INSTAGRAM_CAPTION = TextCap(2200, "characters")


class VideoMetadataError(ValueError):
    """Metadata YouTube would refuse; `field` names it."""

    def __init__(self, field_name: str, problem: str) -> None:
        super().__init__(f"video metadata {field_name}: {problem}")
        self.field = field_name


@dataclass(frozen=True)
class VideoMetadata:
    title: str
    description: str
    tags: tuple[str, ...] = ()
    category_id: str = "28"
    default_language: str = "en"
    privacy_status: str = "private"
    publish_at: datetime | None = None
    self_declared_made_for_kids: bool = False
    contains_synthetic_media: bool = True
    notify_subscribers: bool = False
    hashtags: tuple[str, ...] = field(default=())
    # A platform's own post settings (TikTok's privacy_level and interaction toggles,
    # Instagram's share_to_feed): the video resource carries them as "postSettings" for that
    # platform's channel, and never to YouTube, whose accounts get none.
    post_settings: tuple[tuple[str, Any], ...] = ()
    # The stock footage's credits, in scene order; and, for a platform whose post has one text
    # field (the marked caption: title, then description), that field's cap.
    credits: tuple[Credit, ...] = ()
    caption: TextCap | None = None


def publication_marker(idempotency_key: str) -> str:
    """The unique marker of one publication, put in its description: how a video whose upload
    answer was lost is found again in the channel's uploads playlist."""
    return f"{MARKER_PREFIX}{idempotency_key[:32]}"


def _caption_text(head: str, description: str) -> str:
    return f"{head}\n\n{description}" if description else head


def _caption_head(title: str, marker: str) -> str:
    return f"[{marker}] {title.strip()}".strip()


def full_description(meta: VideoMetadata, marker: str) -> str:
    """The script's text, the footage credits, the hashtags and the marker, a blank line
    between each; the credits fitted (with_credits) to YouTube's bytes and to the caption's
    cap when the post has one."""
    hashtags = " ".join(f"#{h.lstrip('#')}" for h in meta.hashtags)
    tail = f"[{marker}]"
    head = _caption_head(meta.title, marker)

    def fits(body: str) -> bool:
        if len(f"{body}\n\n{tail}".encode()) > DESCRIPTION_MAX_BYTES:
            return False
        cap = meta.caption
        return cap is None or cap.length(_caption_text(head, body)) <= cap.most

    body = with_credits(meta.description.strip(), meta.credits, hashtags, fits)
    return "\n\n".join(p for p in (body, tail) if p)


def tags_length(tags: tuple[str, ...]) -> int:
    """YouTube's count: the characters of every tag, quotes around a tag with a space, and a
    comma between tags."""
    return sum(len(t) + (2 if " " in t else 0) for t in tags) + max(0, len(tags) - 1)


def validate(meta: VideoMetadata, marker: str) -> None:
    """Raises VideoMetadataError naming the first field YouTube would refuse."""
    title = meta.title.strip()
    if not title:
        raise VideoMetadataError("title", "is empty")
    if len(title) > 100:
        raise VideoMetadataError("title", f"has {len(title)} characters; at most 100")
    if "<" in title or ">" in title:
        raise VideoMetadataError("title", "may not contain '<' or '>'")
    description = full_description(meta, marker)
    if "<" in description or ">" in description:
        raise VideoMetadataError("description", "may not contain '<' or '>'")
    size = len(description.encode())
    if size > DESCRIPTION_MAX_BYTES:
        raise VideoMetadataError(
            "description",
            f"is {size} bytes with credits, hashtags and marker; at most {DESCRIPTION_MAX_BYTES}",
        )
    for tag in meta.tags:
        if not tag.strip() or "<" in tag or ">" in tag or "," in tag:
            raise VideoMetadataError("tags", f"tag {tag[:40]!r} is empty or has < > or ,")
    if tags_length(meta.tags) > 500:
        raise VideoMetadataError("tags", f"total {tags_length(meta.tags)} characters; at most 500")
    if meta.category_id not in CATEGORIES:
        raise VideoMetadataError("categoryId", f"{meta.category_id!r} is not a category")
    if not _LANGUAGE.match(meta.default_language):
        raise VideoMetadataError(
            "defaultLanguage", f"{meta.default_language!r} is not a BCP-47 tag"
        )
    if meta.privacy_status not in PRIVACY:
        raise VideoMetadataError("privacyStatus", f"must be one of {', '.join(PRIVACY)}")
    if meta.publish_at is not None:
        if meta.privacy_status != "private":
            raise VideoMetadataError("publishAt", "is only allowed with privacyStatus private")
        if meta.publish_at.tzinfo is None:
            raise VideoMetadataError("publishAt", "needs a time zone")
    for name, value in (
        ("selfDeclaredMadeForKids", meta.self_declared_made_for_kids),
        ("containsSyntheticMedia", meta.contains_synthetic_media),
        ("notifySubscribers", meta.notify_subscribers),
    ):
        if not isinstance(value, bool):
            raise VideoMetadataError(name, "must be true or false")


def video_resource(meta: VideoMetadata, marker: str) -> dict[str, Any]:
    """The videos.insert body (parts snippet and status), after validate()."""
    validate(meta, marker)
    status: dict[str, Any] = {
        "privacyStatus": meta.privacy_status,
        "selfDeclaredMadeForKids": meta.self_declared_made_for_kids,
        "containsSyntheticMedia": meta.contains_synthetic_media,
    }
    if meta.publish_at is not None:
        status["publishAt"] = meta.publish_at.isoformat()
    snippet: dict[str, Any] = {
        "title": meta.title.strip(),
        "description": full_description(meta, marker),
        "categoryId": meta.category_id,
        "defaultLanguage": meta.default_language,
    }
    if meta.tags:
        snippet["tags"] = list(meta.tags)
    body: dict[str, Any] = {"snippet": snippet, "status": status}
    if meta.post_settings:
        body[POST_SETTINGS] = dict(meta.post_settings)
    return body


def marked_caption(
    body: dict[str, Any],
    marker: str,
    most: int,
    length: Callable[[str], int] = len,
    unit: str = "characters",
) -> str:
    """A post's caption from the video resource (snippet title and description) for a platform
    with one text field: the marker first (a listing may show only the caption's start), then
    the title, then the description without its own copy of the marker, cut to `most` as
    `length` measures it (the description gives way, never the marker or the title). The cut
    falls between words where the description has a space, so a link is whole or gone; the
    credits were fitted to the cap beforehand (full_description), so they are not cut."""
    snippet = body.get("snippet", {})
    description = str(snippet.get("description", "")).replace(f"[{marker}]", "").strip()
    head = _caption_head(str(snippet.get("title", "")), marker)
    if length(head) > most:
        raise VideoMetadataError(
            "caption", f"its title and marker are {length(head)} {unit}; at most {most}"
        )
    text = _caption_text(head, description)
    if length(text) <= most:
        return text
    low, high = 0, len(description)  # the longest start of the description that fits
    while low < high:
        middle = (low + high + 1) // 2
        if length(_caption_text(head, description[:middle].rstrip())) <= most:
            low = middle
        else:
            high = middle - 1
    kept = description[:low]
    if low < len(description) and not description[low].isspace():
        space = max(kept.rfind(" "), kept.rfind("\n"))
        kept = kept[:space] if space > 0 else kept  # a word cut in half goes whole
    return _caption_text(head, kept.rstrip())


def body_marker(body: dict[str, Any]) -> str:
    """The publication marker the video resource's description carries ("" without one)."""
    found = _MARKER.search(str(body.get("snippet", {}).get("description", "")))
    return found.group(1) if found else ""
