"""TikTok's rules on the fake: the limits, a chunk plan's validity, the post caps, and a
publish's life from its last byte to a (public) video."""

from __future__ import annotations

import secrets
from collections.abc import Callable
from typing import Any

from fakes.common import NamedFaults
from fakes.tiktok.protocol import DEFAULT_LIMITS, EXPIRED_FAIL_REASON
from fakes.tiktok.state import Knob, State


class Model:
    """The limits (knobs kept in the state, so they survive a restart) and what becomes of a
    publish: its status, its expiry, its video."""

    state: State
    faults: NamedFaults
    clock: Callable[[], float]

    min_chunk = Knob()
    max_chunk = Knob()
    max_final_chunk = Knob()
    max_chunks = Knob()
    upload_ttl = Knob()
    processing_delay = Knob()
    moderation_delay = Knob()
    rate_window = Knob()
    post_window = Knob()
    init_per_minute = Knob()
    status_per_minute = Knob()
    creator_info_per_minute = Knob()
    list_per_minute = Knob()
    unaudited_user_cap = Knob()
    access_token_ttl = Knob()
    refresh_token_ttl = Knob()

    def set_limits(self, **limits: Any) -> None:
        unknown = set(limits) - set(DEFAULT_LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}; known: {sorted(DEFAULT_LIMITS)}")
        with self.state.lock:
            self.state.data["limits"].update(limits)
            self.state.save()

    # -- the model (call with the state lock held) ---------------------------------------
    def advance(self, pub: dict[str, Any]) -> None:
        """An unfinished upload older than its upload_url's lifetime fails."""
        incomplete = pub["received"] < pub["video_size"] and pub["fail_reason"] is None
        if incomplete and self.clock() > pub["created"] + self.upload_ttl:
            pub["fail_reason"] = EXPIRED_FAIL_REASON
            pub["expired"] = True

    def status_of(self, pub: dict[str, Any]) -> str:
        if pub["fail_reason"] is not None:
            return "FAILED"
        video = self.state.data["videos"].get(pub["post_id"] or "")
        if video is not None and self.clock() >= posted_at(video):
            return "PUBLISH_COMPLETE"
        return "PROCESSING_UPLOAD"

    def public_now(self, video: dict[str, Any]) -> bool:
        public_from = video["public_from"]
        return public_from is not None and self.clock() >= public_from

    def _new_video(
        self, open_id: str, publish_id: str, title: str, privacy_level: str, at: float
    ) -> str:
        post_id = str(7 * 10**18 + secrets.randbelow(10**18))
        # Unique create times, so a cursor (a create time) never splits a tie; a tie's is
        # nudged a millisecond on, but the video is posted (and listed) at `at` all the same.
        taken = {v["create_ms"] for v in self.state.data["videos"].values()}
        create_ms = int(at * 1000)
        while create_ms in taken:
            create_ms += 1
        public = privacy_level == "PUBLIC_TO_EVERYONE"
        self.state.data["videos"][post_id] = {
            "id": post_id,
            "open_id": open_id,
            "publish_id": publish_id,
            "title": title,
            "privacy_level": privacy_level,
            "create_ms": create_ms,
            "posted_at": at,
            "public_from": at + self.moderation_delay if public else None,
        }
        return post_id

    def complete(self, pub: dict[str, Any]) -> None:
        """The last byte arrived: processing starts (or fails, when a fault says so)."""
        failed = self.faults.take("processing_failed")
        if failed is not None:
            pub["fail_reason"] = str(failed.get("reason", "internal"))
            return
        title = str(pub["post_info"].get("title") or "")
        at = self.clock() + self.processing_delay
        pub["post_id"] = self._new_video(
            pub["open_id"], pub["publish_id"], title, pub["privacy_level"], at
        )


def post_refusal(fake: Model, open_id: str) -> tuple[str, str] | None:
    """Why the creator may not post now (the daily cap, the unaudited app's user cap)."""
    now = fake.clock()
    creators = fake.state.data["creators"]
    creator = creators[open_id]
    if sum(1 for t in creator["posts"] if t > now - fake.post_window) >= creator["daily_post_cap"]:
        return "spam_risk_too_many_posts", "The daily post cap from the API is reached."
    if creator["audited"]:
        return None
    posting = {
        oid
        for oid, c in creators.items()
        if not c["audited"] and any(t > now - fake.post_window for t in c["posts"])
    }
    if open_id not in posting and len(posting) >= fake.unaudited_user_cap:
        return "reached_active_user_cap", "The daily quota of active publishing users is reached."
    return None


def chunk_plan_problem(fake: Model, source: dict[str, Any]) -> str | None:
    """What breaks the media transfer guide's chunk rules, or None."""
    size, chunk, count = (source.get(k) for k in ("video_size", "chunk_size", "total_chunk_count"))
    if not all(type(v) is int and v > 0 for v in (size, chunk, count)):
        return "video_size, chunk_size and total_chunk_count must be positive integers."
    assert isinstance(size, int) and isinstance(chunk, int) and isinstance(count, int)
    if size < fake.min_chunk:  # a small video goes whole
        if chunk != size:
            return "The chunk size is invalid"
        return None if count == 1 else "The total chunk count is invalid"
    if not fake.min_chunk <= chunk <= fake.max_chunk:
        return "The chunk size is invalid"
    if count != size // chunk or not 1 <= count <= fake.max_chunks:
        return "The total chunk count is invalid"
    if size > fake.max_chunk and count < 2:  # a large video goes in several chunks
        return "The chunk size is invalid"
    if size - (count - 1) * chunk > fake.max_final_chunk:
        return "The chunk size is invalid"
    return None


def posted_at(video: dict[str, Any]) -> float:
    """When the video is on the profile (a state from before "posted_at": its create time)."""
    return float(video.get("posted_at", video["create_ms"] / 1000))
