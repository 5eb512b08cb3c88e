"""A YouTube video's metadata, validated before anything is uploaded.

The limits are YouTube's: a title of at most 100 characters without '<' or '>', a description
of at most 5,000 bytes (hashtags included), tags of at most 500 characters in all (a tag with a
space counts its quotes), `publishAt` only for private videos. Every error names the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

PRIVACY = ("public", "unlisted", "private")
# YouTube's assignable video categories (videoCategories.list, region US).
CATEGORIES = frozenset(
    {"1", "2", "10", "15", "17", "19", "20", "22", "23", "24", "25", "26", "27", "28", "29"}
)
_LANGUAGE = re.compile(r"^[a-z]{2,3}(-[A-Za-z0-9]{2,8})*$")
MARKER_PREFIX = "mdame:"
POST_SETTINGS = "postSettings"  # the video resource's key of a platform's own post settings
_MARKER = re.compile(r"\[(" + re.escape(MARKER_PREFIX) + r"[^\]]+)\]")


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


def publication_marker(idempotency_key: str) -> str:
    """The unique marker of one publication, put in its description: how a video whose upload
    answer was lost is found again in the channel's uploads playlist."""
    return f"{MARKER_PREFIX}{idempotency_key[:32]}"


def full_description(meta: VideoMetadata, marker: str) -> str:
    parts = [meta.description.strip()]
    if meta.hashtags:
        parts.append(" ".join(f"#{h.lstrip('#')}" for h in meta.hashtags))
    parts.append(f"[{marker}]")
    return "\n\n".join(p for p in parts if p)


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
    if size > 5000:
        raise VideoMetadataError(
            "description", f"is {size} bytes with hashtags and marker; at most 5000"
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
    `length` measures it (the description gives way, never the marker or the title)."""
    snippet = body.get("snippet", {})
    title = str(snippet.get("title", "")).strip()
    description = str(snippet.get("description", "")).replace(f"[{marker}]", "").strip()
    head = f"[{marker}] {title}".strip()
    if length(head) > most:
        raise VideoMetadataError(
            "caption", f"its title and marker are {length(head)} {unit}; at most {most}"
        )
    text = f"{head}\n\n{description}" if description else head
    while length(text) > most:
        text = text[:-1]
    return text.rstrip()


def body_marker(body: dict[str, Any]) -> str:
    """The publication marker the video resource's description carries ("" without one)."""
    found = _MARKER.search(str(body.get("snippet", {}).get("description", "")))
    return found.group(1) if found else ""
