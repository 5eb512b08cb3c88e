"""The script's path through the stages, in order (the database's allowed_transitions holds
the same edges; this order lets stages ask 'is this script past X?')."""

from __future__ import annotations

SCRIPT_FLOW = (
    "drafted",
    "approved",
    "planned",
    "visuals_ready",
    "voice_queued",
    "voiced",
    "render_queued",
    "rendered",
    "publishing",
    "published",
)


def script_states(first: str, last: str = "published") -> tuple[str, ...]:
    """The states from `first` through `last`, inclusive."""
    return SCRIPT_FLOW[SCRIPT_FLOW.index(first) : SCRIPT_FLOW.index(last) + 1]
