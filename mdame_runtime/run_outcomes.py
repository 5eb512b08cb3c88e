"""A Dagster run's outcome, written to its `mdame.pipeline_runs` row.

Every stage calls `start_pipeline_run` with the Dagster run id as its execution id; the row is
finished here once the run has ended: by the run status sensors (daemon-launched runs), by
`run_partition` (in-process runs: no daemon, no sensor) and by the liveness sweep (runs whose
process died). Finishing is idempotent: the same outcome twice is a no-op, and a failure or
cancellation replaces a recorded success (mdame.finish_pipeline_run says why), never the reverse.
"""

from __future__ import annotations

import dagster as dg

from mdame_core.state import NotFound, StateConflict, StateStore

_STATUS = {
    dg.DagsterRunStatus.SUCCESS: "succeeded",
    dg.DagsterRunStatus.FAILURE: "failed",
    dg.DagsterRunStatus.CANCELED: "cancelled",
}


def pipeline_status(status: dg.DagsterRunStatus) -> str | None:
    """The pipeline_runs status for an ended Dagster run; None while it has not ended."""
    return _STATUS.get(status)


def record_run_outcome(
    state: StateStore, run_id: str, status: dg.DagsterRunStatus, source: str, *, job: str
) -> bool:
    """Finish the run's row; False when there is nothing to finish (no stage of the run got as
    far as starting its record, the run has not ended, or the row already has this outcome or
    a failure).
    `job` (the Dagster job's name) goes into the row's detail: a partition whose publishing_job
    succeeded last may be finished (mdame.unfinished_partitions reads it)."""
    outcome = pipeline_status(status)
    if outcome is None:
        return False
    try:
        return bool(
            state.finish_pipeline_run(
                run_id,
                outcome,
                {"dagster_status": status.value, "recorded_by": source, "job": job},
            )
        )
    except NotFound:
        return False
    except StateConflict:  # a success after a failure or cancellation: that one stands
        return False
