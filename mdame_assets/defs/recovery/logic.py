"""The recovery pass, run before new work: expired job leases back to the queue, and a count
of this dimension's stalled scripts, which the downstream stages of this run resume (every
stage also accepts its own in-progress state, e.g. voice_queued, as 'crashed here, redo')."""

from __future__ import annotations

from mdame_assets.runtime import Step

STALLED_STATES = ("voice_queued", "render_queued", "publishing")


def recovery_pass(step: Step) -> dict[str, int]:
    reaped = step.state.reap_expired_jobs()
    stalled = sum(
        len(step.state.list_work_units("script", dimension_id=step.dimension_id, state=s))
        for s in STALLED_STATES
    )
    step.log("recovery", reaped_jobs=reaped, stalled_scripts=stalled)
    return {"reaped_jobs": reaped, "stalled_scripts": stalled}
