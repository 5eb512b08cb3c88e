"""What Meta's Instagram API says: limits, fields, metrics, and the shapes of its errors."""

from __future__ import annotations

import base64
import json
import re
import secrets
from typing import Any

DEFAULT_VERSION = "v24.0"
TOKEN_LIFETIME = 60 * 86400  # long-lived Instagram User tokens: 60 days
CONTAINER_LIFETIME = 24 * 3600.0  # "Containers expire after 24 hours"
PUBLISH_WINDOW = 24 * 3600.0  # content_publishing_limit: quota_duration 86400
PUBLISH_LIMIT = 100  # Content Publishing guide (the limit reference page still says 50)
DEFAULT_PROCESSING_DELAY = 0.5
CAPTION_MAX = 2200
MENTIONS_MAX = 20
PAGE_DEFAULT, PAGE_MAX = 25, 100
APP_ID = "990602627938098"  # named in the revoked-token message, as Meta does

VERSION_PATH = re.compile(r"^v\d+\.\d+$")

# Throttling codes (Graph API rate limiting): the message Meta sends for each.
THROTTLE_MESSAGES: dict[int, str] = {
    4: "(#4) Application request limit reached",
    17: "(#17) User request limit reached",
    32: "(#32) Page request limit reached",
    613: "(#613) Calls to this api have exceeded the rate limit.",
    80002: "(#80002) There have been too many calls to this Instagram account. "
    "Wait a bit and try again.",
}

# Insights metrics a reel has, and those Meta retired (asking for one is an error).
REEL_METRICS = (
    "comments",
    "likes",
    "reach",
    "saved",
    "shares",
    "total_interactions",
    "views",
    "ig_reels_avg_watch_time",
    "ig_reels_video_view_total_time",
)
RETIRED_METRICS = (
    "plays",
    "impressions",
    "clips_replays_count",
    "ig_reels_aggregated_all_plays_count",
    "video_views",
)
CONTAINER_FIELDS = ("id", "status", "status_code", "video_status", "copyright_check_status")
MEDIA_FIELDS = (
    "id",
    "caption",
    "comments_count",
    "is_comment_enabled",
    "is_shared_to_feed",
    "like_count",
    "media_product_type",
    "media_type",
    "media_url",
    "owner",
    "permalink",
    "shortcode",
    "thumbnail_url",
    "timestamp",
    "username",
)
ACCOUNT_FIELDS = ("id", "user_id", "username", "name", "account_type", "media_count")


# Documented Instagram errors (Error Codes reference): code, subcode, message, the user title
# and the user message (the table's "User Message" column; {names} are filled in).
IG_ERRORS: dict[str, tuple[int, int, str, str, str]] = {
    "unknown_media_type": (
        100,
        2207023,
        "The media type is unknown.",
        "Unknown media type",
        "The media type {media_type} is unknown.",
    ),
    "caption_too_long": (
        36004,
        2207010,
        "The caption is too long.",
        "Caption too long",
        "The submitted image's caption was {length} characters long. The maximum number of "
        "characters permitted for a caption is {most}. Please submit media with a shorter caption.",
    ),
    "too_many_tags": (
        100,
        2207040,
        "Too many tags.",
        "Too many tags",
        "Cannot use more than {most} tags per created media.",
    ),
    "fetch_failed": (
        9004,
        2207052,
        "Media download has failed.",
        "Media download failed",
        "The media could not be fetched from this uri: {uri}",
    ),
    "builder_missing": (
        24,
        2207008,
        "Media builder does not exist or has been expired.",
        "Media builder not found",
        "The media builder with creation id = {creation_id} does not exist or has been expired.",
    ),
    "expired": (
        -2,
        2207020,
        "The media has expired.",
        "Media expired",
        "The media you are trying to access has expired. Please try to upload again.",
    ),
    "upload_failed": (
        -1,
        2207053,
        "An unknown error occurred during upload.",
        "Upload failed",
        "unknown upload error",
    ),
    "not_ready": (
        9007,
        2207027,
        "Media ID is not available",
        "Media not ready for publishing",
        "The media is not ready for publishing, please wait for a moment",
    ),
    "publish_limit": (
        9,
        2207042,
        "Application request limit reached",
        "Publishing limit reached",
        "You reached maximum number of posts that is allowed to be published by Content "
        "Publishing API.",
    ),
}


def _trace_id() -> str:
    return base64.b64encode(secrets.token_bytes(8)).decode().rstrip("=")


def graph_error(
    message: str,
    code: int,
    subcode: int | None = None,
    *,
    kind: str = "OAuthException",
    transient: bool | None = None,
    user_title: str | None = None,
    user_msg: str | None = None,
) -> dict[str, Any]:
    body: dict[str, Any] = {"message": message, "type": kind, "code": code}
    if subcode is not None:
        body["error_subcode"] = subcode
    if transient is not None:
        body["is_transient"] = transient
    if user_title is not None:
        body["error_user_title"] = user_title
    if user_msg is not None:
        body["error_user_msg"] = user_msg
    body["fbtrace_id"] = _trace_id()
    return {"error": body}


def ig_error(key: str, **values: Any) -> dict[str, Any]:
    code, subcode, message, title, user_msg = IG_ERRORS[key]
    filled = user_msg.format(**values) if values else user_msg
    return graph_error(message, code, subcode, user_title=title, user_msg=filled)


def upload_error(
    message: str, kind: str = "ProcessingFailedError", retriable: bool = False
) -> dict:
    """The upload server's error shape; its message is itself a JSON document, as Meta's is."""
    inner = json.dumps({"success": False, "error": {"message": message}}, separators=(",", ":"))
    return {"debug_info": {"retriable": retriable, "type": kind, "message": inner}}


def server_error() -> dict[str, Any]:
    return graph_error(
        "An unexpected error has occurred. Please retry your request later.", 2, transient=True
    )


def no_object(method: str, node: str) -> dict[str, Any]:
    return graph_error(
        f"Unsupported {method.lower()} request. Object with ID '{node}' does not exist, cannot be "
        "loaded due to missing permissions, or does not support this operation.",
        100,
        33,
        kind="GraphMethodException",
    )
