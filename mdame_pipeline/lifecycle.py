"""The script's path through the stages, in order, as the database's allowed_transitions define
it (StateStore.work_flow): the stages ask 'is this script past X?' in that order."""

from __future__ import annotations

from mdame_core.state import StateStore

SCRIPT_GOAL = "published"


def script_states(state: StateStore, first: str, last: str = SCRIPT_GOAL) -> tuple[str, ...]:
    """The script states from `first` through `last`, inclusive, along the stages' path."""
    flow = state.work_flow("script", SCRIPT_GOAL)
    return flow[flow.index(first) : flow.index(last) + 1]
