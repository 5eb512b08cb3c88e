"""The dimension file's shared rules: the slug, colour, check-name and model-name patterns, the
publishing platforms and safety profiles, and the defaults and limits of quota and budget."""

from __future__ import annotations

import re

SLUG_PATTERN = re.compile(r"^[a-z][a-z0-9_-]{1,39}$")
COLOUR_PATTERN = re.compile(r"^#[0-9a-fA-F]{6}$")
PLATFORMS = ("youtube", "tiktok", "instagram")
# Platform names a file may no longer use, each with the fix. The outbox is the provider that
# stands in for every platform offline (MDAME_PROVIDERS chooses it), never an account's platform:
# what was an `outbox` account publishes to YouTube.
RETIRED_PLATFORMS = {
    "outbox": (
        "platform: outbox is now platform: youtube (the outbox is the offline provider that "
        "stands in for every platform, chosen by MDAME_PROVIDERS, not by the file): write "
        "youtube"
    ),
}
# The uploads an account may start a day unless its file says otherwise (daily_posts): YouTube's
# videos.insert calls, the posts TikTok lets a creator make through the API (it publishes no
# number; integrators see 15-25), and Instagram's 100 a rolling day (content_publishing_limit).
DAILY_POSTS = {"youtube": 100, "tiktok": 15, "instagram": 100}
SAFETY_PROFILES = ("general", "family", "strict")
MAX_SHORT_S = 180.0  # YouTube Shorts' longest
CHECK_NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_.-]{0,62}$")  # as mdame.reviews.check_name
# YouTube's daily quota resets at midnight Pacific time.
DEFAULT_QUOTA_TIMEZONE = "America/Los_Angeles"
# Paid model calls: $1.00 a day unless the YAML says otherwise.
DEFAULT_DAILY_BUDGET_MICROS = 1_000_000
MAX_DAILY_BUDGET_USD = 10_000
MODEL_NAME_PATTERN = re.compile(r"^[a-z0-9][a-z0-9._-]{0,99}$")
