"""What TikTok's API says: limits, fields, error codes and their statuses, the answer envelope."""

from __future__ import annotations

import secrets
import time
from typing import Any

MiB = 1024 * 1024
PUBLIC_OPTIONS = ["PUBLIC_TO_EVERYONE", "MUTUAL_FOLLOW_FRIENDS", "SELF_ONLY"]
PRIVATE_OPTIONS = ["FOLLOWER_OF_CREATOR", "MUTUAL_FOLLOW_FRIENDS", "SELF_ONLY"]
PRIVACY_LEVELS = {"PUBLIC_TO_EVERYONE", "MUTUAL_FOLLOW_FRIENDS", "FOLLOWER_OF_CREATOR", "SELF_ONLY"}
VIDEO_TYPES = {"video/mp4", "video/quicktime", "video/webm"}
VIDEO_FIELDS = {
    "id", "create_time", "cover_image_url", "share_url", "video_description", "duration",
    "height", "width", "title", "embed_html", "embed_link", "like_count", "comment_count",
    "share_count", "view_count",
}  # fmt: skip
DEFAULT_SCOPES = ["user.info.basic", "video.publish", "video.list"]
TITLE_MAX_UTF16 = 2200  # the caption sent at init
LISTED_TEXT_MAX = 150  # title and video_description in the Video Object
DEFAULT_LIMITS: dict[str, Any] = {
    "init_per_minute": 6,
    "status_per_minute": 30,
    "creator_info_per_minute": 20,
    "list_per_minute": 600,
    "rate_window": 60.0,
    "min_chunk": 5 * MiB,
    "max_chunk": 64 * MiB,
    "max_final_chunk": 128 * MiB,
    "max_chunks": 1000,
    "upload_ttl": 3600.0,  # "the upload_url is valid for one hour after issuance"
    "processing_delay": 0.5,
    "moderation_delay": 0.0,
    "post_window": 86400.0,
    "unaudited_user_cap": 5,  # users an unaudited client may post for in 24 hours
    "access_token_ttl": 7200,
    "refresh_token_ttl": 180 * 86400,
}
# The token endpoint's status for an error; the docs show the body, not the status (RFC 6749
# says 400), so a client should read `error` whatever the status.
OAUTH_ERROR_STATUS = 400
# No documented fail_reason names an expired upload; "internal" is the documented retryable one.
EXPIRED_FAIL_REASON = "internal"


ERROR_STATUS = {
    "ok": 200,
    "access_token_invalid": 401,
    "scope_not_authorized": 401,
    "invalid_params": 400,
    "invalid_publish_id": 400,
    "token_not_authorized_for_specified_publish_id": 400,
    "privacy_level_option_mismatch": 403,
    "unaudited_client_can_only_post_to_private_accounts": 403,
    "spam_risk_too_many_posts": 403,
    "reached_active_user_cap": 403,
    "url_ownership_unverified": 403,
    "rate_limit_exceeded": 429,
    "internal_error": 500,
    "not_found": 404,
}


def log_id() -> str:
    return time.strftime("%Y%m%d%H%M%S", time.gmtime()) + secrets.token_hex(9).upper()


def envelope(code: str, message: str = "", data: dict[str, Any] | None = None) -> dict:
    return {"data": data or {}, "error": {"code": code, "message": message, "log_id": log_id()}}
