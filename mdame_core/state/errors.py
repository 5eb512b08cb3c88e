"""The errors of the state store: `StateError` and its subclasses, one per SQLSTATE of class
MD that the RPCs raise on purpose, and the mapping of a server error to them.

A refused call raises a `StateError` carrying the SQLSTATE; a lost connection
(psycopg.OperationalError) is not mapped, because then the outcome of the call is unknown.
"""

from __future__ import annotations

from datetime import datetime

import psycopg


class EnvironmentMismatch(RuntimeError):
    """The database belongs to another ENV (or records none): the client refuses to use it."""


class StateError(Exception):
    """An RPC refused the call; nothing was changed. `sqlstate` says why (class MD: ours)."""

    def __init__(self, rpc: str, message: str, sqlstate: str | None = None) -> None:
        super().__init__(f"{rpc}: {message}")
        self.rpc = rpc
        self.message = message
        self.sqlstate = sqlstate


class InvalidInput(StateError):
    """MD001: NULL or empty key, unknown kind, negative amount, oversized JSON, ..."""


class IdempotencyConflict(StateError):
    """MD002: an idempotency key was reused with different content."""


class StateConflict(StateError):
    """MD003: the row is not in the expected state, or the transition is not allowed."""


class LeaseLost(StateError):
    """MD004: a job lease or a lock fencing token is no longer ours."""


class ReconcileRequired(StateError):
    """MD005: the last provider attempt's outcome is unknown; reconcile before retrying."""


class NotFound(StateError):
    """MD006: the row the call refers to does not exist."""


class Fenced(LeaseLost):
    """MD007: the caller's pipeline-lock token is not (or no longer) the live one."""


class RetryNotDue(StateConflict):
    """MD009: a retry was asked for before its backoff expired."""


class MediaCollected(StateConflict):
    """MD010: a row would name stored media that housekeeping collected (its bytes were
    deleted): store the bytes again with put_file(..., registry=state) first."""


class LeaseHeld(LeaseLost):
    """MD011: another holder's lease on this work still runs (a killed run's upload may still
    be answered until then). Not a failure: the work waits, and is asked again from `until`."""

    def __init__(self, rpc: str, message: str, sqlstate: str | None = None) -> None:
        super().__init__(rpc, message, sqlstate)
        self.until: datetime | None = None


class FenceLost(Fenced):
    """Raised before anything is sent: this holder knows its lock is lost (taken over, or not
    renewed before its lease ran out), so it makes no further call."""

    def __init__(self, lock_name: str, reason: str) -> None:
        super().__init__("fence", f"lock {lock_name} lost: {reason}", "MD007")


_ERRORS: dict[str, type[StateError]] = {
    "MD001": InvalidInput,
    "MD002": IdempotencyConflict,
    "MD003": StateConflict,
    "MD004": LeaseLost,
    "MD005": ReconcileRequired,
    "MD006": NotFound,
    "MD007": Fenced,
    "MD009": RetryNotDue,
    "MD010": MediaCollected,
    "MD011": LeaseHeld,
}


def _mapped(rpc: str, exc: psycopg.Error) -> StateError | None:
    """The server refused the call -> StateError; None for a lost connection (re-raise it)."""
    if isinstance(exc, psycopg.OperationalError) or exc.sqlstate is None:
        return None
    message = _clipped(exc.diag.message_primary or str(exc))
    mapped = _ERRORS.get(exc.sqlstate, StateError)(rpc, message, exc.sqlstate)
    if isinstance(mapped, LeaseHeld):
        mapped.until = _timestamp(exc.diag.message_detail)
    return mapped


def _timestamp(detail: str | None) -> datetime | None:
    try:
        return datetime.fromisoformat(detail) if detail else None
    except ValueError:
        return None


MAX_ERROR_CHARS = 1000


def _clipped(message: str) -> str:
    """Server messages can quote the offending input (a constraint's failing value): keep what
    reaches logs, events and run metadata bounded whatever the input was."""
    if len(message) <= MAX_ERROR_CHARS:
        return message
    return f"{message[:MAX_ERROR_CHARS]}... ({len(message)} characters)"
