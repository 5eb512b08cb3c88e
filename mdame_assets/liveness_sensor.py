"""The liveness sweep (mdame_runtime.liveness) as a sensor of a code location."""

from __future__ import annotations

import dagster as dg
from dagster._core.launcher import DefaultRunLauncher

from mdame_resources.state import StateStoreResource
from mdame_runtime.liveness import sweep


def make_liveness_sensor(name: str) -> dg.SensorDefinition:
    """The sweep every minute, in a code location. With the DefaultRunLauncher a run worker is a
    subprocess of its location's code server, so each location judges the workers of its own
    runs, on its own host; other launchers' workers are elsewhere: only runs tagged with their
    process are judged then."""

    @dg.sensor(
        name=name,
        minimum_interval_seconds=60,
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Every minute: marks failed the runs of this code location whose process "
        "died, frees their pool slots and pending steps and finishes their mdame.pipeline_runs "
        "rows (their locks and job leases expire on their own). It logs what it swept.",
    )
    def _liveness(
        context: dg.SensorEvaluationContext, state: StateStoreResource
    ) -> dg.SensorResult:
        local = isinstance(context.instance.run_launcher, DefaultRunLauncher)
        origin = context.code_location_origin
        report = sweep(
            context.instance,
            state.get_client(),
            local_workers=local,
            location=origin.location_name if origin is not None else None,
        )
        if report:
            context.log.warning(f"liveness sweep: {report.summary()}")
        return dg.SensorResult(skip_reason=report.summary())

    return _liveness
