"""Small helpers the stages share for walking work units through their state machines."""

from __future__ import annotations

from typing import Any

from mdame_core.state import StateStore, WorkUnit
from mdame_domain.idempotency import idempotency_key


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


def series_key(state: StateStore, script: WorkUnit, kind: str, stage: str) -> str:
    """The key of the script's next `kind` unit: the stage's key, or the next in its series once
    earlier units failed because their file was damaged (healing keeps the failed unit)."""
    remade = len(state.list_work_units(kind, script_id=script.id, state="failed"))
    if remade == 0:
        return idempotency_key(script.idempotency_key, stage)
    return idempotency_key(script.idempotency_key, stage, f"remake{remade}")
