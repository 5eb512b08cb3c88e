"""The recovery pass: stalled work from crashed runs is dealt with before new work.

1. Expired job leases go back to the queue (or to dead once their attempts are used up).
2. Scripts of the dimension stuck in an in-progress state, unchanged for `stall_after_s` by the
   database's clock (MDAME_STALL_AFTER_S; the host's may be off):
   - voice_queued / render_queued: a run crashed there. The finding counts one attempt
     (bump_work_attempt) and the script stays put, so its stage resumes it (every stage accepts
     its own in-progress state as 'crashed here, redo'). A script already resumed
     `max_attempts` times is failed with the reason instead of crashing runs forever.
   - publishing: a video may be out, so a script with an upload in flight is left to the
     publications stage, which takes the upload over and asks the channel (the session's
     status, else a search of the channel's uploads) through the same code as any interrupted
     upload, before any new submission. A script with a video out is resumed, never failed;
     only one with nothing out and nothing in flight is counted, and failed at max attempts
     (its quota reservations released).
Recently changed scripts are left alone: a crash a minute ago is resumed by the stage without
counting against it, so an immediate rerun ends exactly like a clean run.

Exclusion: the pass acts under the dimension's pipeline lock (inside a pipeline step, or taking
it in `recover_dimension_locked`), so two passes, or a pass and a stage, never act on one
script at once. Should a transition still lose a race (StateConflict), the script is re-read and
the decision made again from what the database now says.
"""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field
from enum import StrEnum

from mdame_core import settings
from mdame_core.state import Attempt, StateConflict, StateStore, WorkUnit
from mdame_pipeline.locks import held_lock

RETRY_STATES = ("voice_queued", "render_queued")
PUBLISHING = "publishing"
STALLED_STATES = (*RETRY_STATES, PUBLISHING)
UNSETTLED = ("submitted", "unknown")  # attempt outcomes nobody knows yet
STALL_AFTER_VAR = "MDAME_STALL_AFTER_S"
MAX_ATTEMPTS_VAR = "MDAME_STALL_MAX_ATTEMPTS"
# Unchanged this long in an in-progress state: a run crashed there.
STALL_AFTER_S: float = settings.default(STALL_AFTER_VAR)
# Resumed this often and stalled again: failed, not retried forever.
MAX_ATTEMPTS: int = settings.default(MAX_ATTEMPTS_VAR)
_RACE_RETRIES = 3


class Action(StrEnum):
    NONE = "none"  # not (or no longer) in an in-progress state
    WAIT = "wait"  # changed recently: resumed by its stage without counting an attempt
    RETRY = "retry"  # count the attempt; its stage resumes it
    FAIL = "fail"  # resumed max_attempts times already
    RECONCILE = "reconcile"  # an upload's outcome is unknown: ask the channel first
    RESUME = "resume"  # a video is out: the publications stage finishes it; never failed


@dataclass(frozen=True)
class Uploads:
    """What a publishing script's publications say: anything in flight, anything out."""

    in_flight: bool = False
    out: bool = False


def stall_after_setting() -> float:
    return float(settings.get(STALL_AFTER_VAR))


def max_attempts_setting() -> int:
    return int(settings.get(MAX_ATTEMPTS_VAR))


def decide(
    script_state: str,
    attempts: int,
    age_s: float,
    uploads: Uploads | None = None,
    *,
    stall_after_s: float = STALL_AFTER_S,
    max_attempts: int = MAX_ATTEMPTS,
) -> Action:
    """What the pass does with one script (pure: the rules above, nothing else)."""
    if script_state not in STALLED_STATES:
        return Action.NONE
    if age_s < stall_after_s:
        return Action.WAIT
    if script_state == PUBLISHING and uploads is not None:
        if uploads.in_flight:
            return Action.RECONCILE
        if uploads.out:
            return Action.RESUME
    return Action.FAIL if attempts >= max_attempts else Action.RETRY


@dataclass
class RecoveryReport:
    reaped_jobs: int = 0
    retried: list[int] = field(default_factory=list)  # script ids, attempt counted
    failed: list[int] = field(default_factory=list)  # script ids
    to_reconcile: list[int] = field(default_factory=list)  # script ids left to the stage
    resumable: list[int] = field(default_factory=list)  # script ids left as they are

    def counts(self) -> dict[str, int]:
        return {
            "reaped_jobs": self.reaped_jobs,
            "stalled_retried": len(self.retried),
            "stalled_failed": len(self.failed),
            "awaiting_reconcile": len(self.to_reconcile),
            "resumable": len(self.resumable),
        }


# ------------------------------------------------------------------------------------------
# Publications: whether the channel may hold a video the database does not record
# ------------------------------------------------------------------------------------------
def _last_attempt(state: StateStore, pub: WorkUnit) -> Attempt | None:
    attempts = state.list_attempts(pub.idempotency_key)
    return attempts[-1] if attempts else None


def in_flight(state: StateStore, pub: WorkUnit) -> bool:
    """Whether the channel may have a video for `pub` that the database does not record."""
    if pub.state == "uploading":
        return True
    last = _last_attempt(state, pub)
    return last is not None and last.status in UNSETTLED


# ------------------------------------------------------------------------------------------
# The pass
# ------------------------------------------------------------------------------------------
@dataclass
class _Pass:
    state: StateStore
    stall_after_s: float
    max_attempts: int
    report: RecoveryReport

    def recover(self, script: WorkUnit) -> None:
        for _ in range(_RACE_RETRIES):
            try:
                self._act(script)
                return
            except StateConflict:
                # Lost a race (a stage or another writer moved it): the row decides, re-read.
                again = self.state.get_work_unit("script", script.id)
                if again is None:
                    return
                script = again
        self.report.resumable.append(script.id)  # still moving: the next pass looks again

    def _decide(self, script: WorkUnit, pubs: list[WorkUnit]) -> Action:
        uploads = Uploads(
            in_flight=any(in_flight(self.state, p) for p in pubs),
            out=any(p.state == "published" for p in pubs),
        )
        # Both ends on the database's clock (updated_at is its now() too): a host whose clock
        # runs ahead would find live work stalled, one that runs behind would never recover.
        age_s = (self.state.db_now() - script.updated_at).total_seconds()
        return decide(
            script.state,
            script.attempts,
            age_s,
            uploads,
            stall_after_s=self.stall_after_s,
            max_attempts=self.max_attempts,
        )

    def _publications(self, script: WorkUnit) -> list[WorkUnit]:
        if script.state != PUBLISHING:
            return []
        return self.state.list_work_units("publication", script_id=script.id)

    def _act(self, script: WorkUnit) -> None:
        action = self._decide(script, self._publications(script))
        if action is Action.RETRY:
            self.state.bump_work_attempt(
                "script", script.id, {"recovered": "stalled", "stalled_in": script.state}
            )
            self.report.retried.append(script.id)
        elif action is Action.FAIL:
            self._fail(script)
        elif action is Action.RECONCILE:
            self.report.to_reconcile.append(script.id)
        elif action in (Action.WAIT, Action.RESUME):
            self.report.resumable.append(script.id)

    def _fail(self, script: WorkUnit) -> None:
        reason = (
            f"stalled in {script.state} again after {script.attempts} resumed attempts "
            f"(max {self.max_attempts})"
        )
        # Its pending publications fail and their quota is released in the same phase.
        if self.state.fail_script(script.id, script.state, reason):
            self.report.failed.append(script.id)
        else:  # a video may be out after all: leave it to the publications stage
            self.report.resumable.append(script.id)


def recover(
    state: StateStore,
    dimension_id: int,
    *,
    stall_after_s: float | None = None,
    max_attempts: int | None = None,
) -> RecoveryReport:
    """One pass over the dimension's stalled scripts. The caller holds the pipeline lock."""
    report = RecoveryReport(reaped_jobs=state.reap_expired_jobs())
    work = _Pass(
        state,
        stall_after_s if stall_after_s is not None else stall_after_setting(),
        max_attempts if max_attempts is not None else max_attempts_setting(),
        report,
    )
    for script_state in STALLED_STATES:
        for script in state.list_work_units(
            "script", dimension_id=dimension_id, state=script_state
        ):
            work.recover(script)
    return report


def recover_dimension_locked(
    state: StateStore,
    dimension_slug: str,
    *,
    stall_after_s: float | None = None,
    max_attempts: int | None = None,
) -> RecoveryReport:
    """A pass outside a pipeline run (a sensor, an operator): it takes the dimension's pipeline
    lock first (LockBusy while a run holds it), so it never overlaps a stage or another pass."""
    dimension = state.get_dimension(dimension_slug)
    if dimension is None:
        raise ValueError(f"dimension {dimension_slug!r} is not in the registry")
    holder = f"recovery:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    with held_lock(state, dimension_slug, holder) as fenced:
        return recover(fenced, dimension.id, stall_after_s=stall_after_s, max_attempts=max_attempts)
