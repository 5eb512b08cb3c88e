"""What the YouTube Data API says: quota costs and days, its error bodies, a video resource."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

PACIFIC = ZoneInfo("America/Los_Angeles")
DEFAULT_LIMITS = {"insert": 100, "search": 100, "units": 10_000}
LIST_COST = 1
THUMBNAIL_COST = 50
THUMBNAIL_MAX_BYTES = 2 * 1024 * 1024  # the API's limit


def quota_day(now: datetime | None = None) -> str:
    return (now or datetime.now(UTC)).astimezone(PACIFIC).date().isoformat()


def api_error(status: int, reason: str, message: str, domain: str = "youtube.video") -> dict:
    return {
        "error": {
            "code": status,
            "message": message,
            "errors": [{"domain": domain, "reason": reason, "message": message}],
        }
    }


# Google's answer to an access token it does not take (expired, revoked or unknown).
UNAUTHENTICATED = {
    "error": {
        "code": 401,
        "message": "Request had invalid authentication credentials. Expected OAuth 2 access "
        "token, login cookie or other valid authentication credential. See "
        "https://developers.google.com/identity/sign-in/web/devconsole-project.",
        "errors": [
            {
                "message": "Invalid Credentials",
                "domain": "global",
                "reason": "authError",
                "location": "Authorization",
                "locationType": "header",
            }
        ],
        "status": "UNAUTHENTICATED",
    }
}
INVALID_TOKEN = 'Bearer realm="https://accounts.google.com/", error="invalid_token"'


def video_resource(v: dict[str, Any], part: str) -> dict[str, Any]:
    parts = set(part.split(",")) if part else {"snippet", "status"}
    out: dict[str, Any] = {"kind": "youtube#video", "id": v["id"]}
    if "snippet" in parts:
        out["snippet"] = {
            **v["snippet"],
            "channelId": v["channel"],
            "publishedAt": v["published_at"],
        }
    if "status" in parts:
        out["status"] = v["status"]
    if "processingDetails" in parts:
        out["processingDetails"] = {"processingStatus": v["processing"]}
    if "statistics" in parts:
        out["statistics"] = dict(
            v.get("statistics") or {"viewCount": "0", "likeCount": "0", "commentCount": "0"}
        )
    return out
