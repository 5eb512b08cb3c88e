"""Small helpers the stages share for walking work units through their state machines."""

from __future__ import annotations

from typing import Any

from mdame_core.state import StateStore, WorkUnit


def advance(
    state: StateStore, unit: WorkUnit, to_state: str, detail: dict[str, Any] | None = None
) -> WorkUnit:
    """Moves `unit` from the state it was read in to `to_state` and returns it re-read.

    The RPC checks the from-state under a row lock, so a concurrent or repeated call fails
    loudly instead of moving the unit twice.
    """
    state.transition(unit.kind, unit.id, unit.state, to_state, detail or {})
    refreshed = state.get_work_unit(unit.kind, unit.id)
    assert refreshed is not None
    return refreshed
