"""TikTok's Content Posting API rules, as plain functions: how a file is cut into chunks, what a
post's caption and privacy are, and what a post's status says about its upload.

The chunk rules are the media transfer guide's: a file under 5 MiB goes whole; otherwise every
chunk is 5-64 MiB except the last, which takes the remainder (up to 128 MiB);
total_chunk_count = floor(video_size / chunk_size), at most 1,000, sent in order. The plan is a
pure function of the file's size and the preferred chunk size, so a run that resumes an upload
cuts the file where the run that initialized it declared it would.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mdame_domain.video_metadata import (
    POST_SETTINGS,
    TIKTOK_CAPTION,
    VideoMetadataError,
    marked_caption,
)

MIB = 1024 * 1024
MIN_CHUNK, MAX_CHUNK, MAX_FINAL_CHUNK = 5 * MIB, 64 * MIB, 128 * MIB
MAX_CHUNKS = 1000
# A caption (post_info.title) is at most 2,200 UTF-16 code units; the video list returns only
# its first 150 characters, so the marker goes first to stay findable.
MAX_CAPTION_UNITS = TIKTOK_CAPTION.most
LISTED_CAPTION_CHARS = 150

PRIVACY_LEVELS = ("PUBLIC_TO_EVERYONE", "MUTUAL_FOLLOW_FRIENDS", "FOLLOWER_OF_CREATOR", "SELF_ONLY")
# The video resource's privacyStatus, as TikTok names it. "unlisted" has no TikTok equivalent.
PRIVACY_FROM_STATUS = {"public": "PUBLIC_TO_EVERYONE", "private": "SELF_ONLY"}

# status/fetch's statuses: still working, and the final ones.
PROCESSING = ("PROCESSING_UPLOAD", "PROCESSING_DOWNLOAD")
PUBLISHED, FAILED, SENT_TO_INBOX = "PUBLISH_COMPLETE", "FAILED", "SEND_TO_USER_INBOX"


class TikTokRuleError(ValueError):
    """A post TikTok would refuse, named before anything is sent."""


@dataclass(frozen=True)
class ChunkPlan:
    """How a file of `size` bytes is sent: `count` chunks of `chunk_size`, the last one
    holding the remainder."""

    size: int
    chunk_size: int
    count: int

    def source_info(self) -> dict[str, Any]:
        return {
            "source": "FILE_UPLOAD",
            "video_size": self.size,
            "chunk_size": self.chunk_size,
            "total_chunk_count": self.count,
        }

    def chunk_at(self, offset: int) -> tuple[int, int]:
        """The chunk that starts at `offset`: (first byte, byte after its last). An offset that
        is not a chunk's first byte is refused: TikTok takes whole chunks, in order."""
        if offset < 0 or offset >= self.size or offset % self.chunk_size:
            raise TikTokRuleError(
                f"byte {offset} starts no chunk of a {self.size}-byte upload in "
                f"{self.chunk_size}-byte chunks"
            )
        index = offset // self.chunk_size
        if index >= self.count:
            raise TikTokRuleError(f"byte {offset} is past the last of {self.count} chunks")
        end = self.size if index == self.count - 1 else offset + self.chunk_size
        return offset, end


def chunk_plan(size: int, preferred_chunk: int = 10 * MIB) -> ChunkPlan:
    """The chunks a file of `size` bytes is declared in at init (see the module's rules)."""
    if size <= 0:
        raise TikTokRuleError(f"a video of {size} bytes cannot be uploaded")
    if size < MIN_CHUNK:
        return ChunkPlan(size, size, 1)
    chunk = min(max(preferred_chunk, MIN_CHUNK), MAX_CHUNK, size)
    if size // chunk > MAX_CHUNKS:
        chunk = -(-size // MAX_CHUNKS)  # the fewest bytes that keeps it to 1,000 chunks
    count = size // chunk
    final = size - chunk * (count - 1)
    if chunk > MAX_CHUNK or final > MAX_FINAL_CHUNK:
        raise TikTokRuleError(f"a video of {size} bytes is over what 1,000 chunks can carry")
    return ChunkPlan(size, chunk, count)


def caption(body: dict[str, Any], marker: str) -> str:
    """post_info.title: the marked caption (video_metadata.marked_caption), cut to TikTok's
    2,200 UTF-16 units."""
    try:
        return marked_caption(
            body, marker, TIKTOK_CAPTION.most, TIKTOK_CAPTION.length, TIKTOK_CAPTION.unit
        )
    except VideoMetadataError as exc:
        raise TikTokRuleError(str(exc)) from None


def privacy_level(body: dict[str, Any], allowed: list[str]) -> str:
    """The post's privacy_level: the dimension's tiktok.privacy_level, else the video resource's
    privacyStatus in TikTok's terms; it must be one creator_info allows (an unaudited app's
    posts may only be SELF_ONLY)."""
    status = str(body.get("status", {}).get("privacyStatus", "private"))
    level = body.get(POST_SETTINGS, {}).get("privacy_level") or PRIVACY_FROM_STATUS.get(status)
    if level is None:
        raise TikTokRuleError(
            f"privacy {status!r} has no TikTok equivalent; use public or private, or set "
            "tiktok.privacy_level"
        )
    if level not in allowed:
        hint = (
            " (the account is private, and an unaudited TikTok app may only post privately, to "
            "private accounts: set the dimension's tiktok.privacy_level to SELF_ONLY, or have "
            "the app audited and the account made public)"
            if level == "PUBLIC_TO_EVERYONE"
            else ""
        )
        raise TikTokRuleError(
            f"privacy {level} is not one this creator may post with "
            f"(creator_info allows {', '.join(allowed) or 'none'}){hint}"
        )
    return level


def posted_id(status: dict[str, Any], publish_id: str) -> str:
    """The id a completed post is known by: its public post id once moderation has given one,
    else its publish_id (a private post never gets a public id)."""
    ids = status.get("publicaly_available_post_id") or []
    return str(ids[0]) if ids else publish_id
