"""The script's path through the stages, in order (the database's allowed_transitions holds
the same edges; this order lets stages ask 'is this script past X?')."""

from __future__ import annotations

from collections.abc import Iterator

from mdame_assets.runtime import Step
from mdame_assets.work import advance
from mdame_core.state import WorkUnit

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


def scripts_entering(step: Step, ready: str, in_progress: str) -> Iterator[WorkUnit]:
    """This partition's scripts for a stage: those at `ready` move to `in_progress`, and those
    already `in_progress` (a run that crashed mid-stage) are yielded again to be redone."""
    for script in step.units("script"):
        if script.state == ready:
            script = advance(step.state, script, in_progress)
        if script.state == in_progress:
            yield script
