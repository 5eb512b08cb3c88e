"""The registry sensor: registered dimensions -> the `dimension` dynamic partition.

It reads only: registering a dimension file is the operator's `mdame dimensions sync` (the
pipeline's role cannot change budgets or channels). A file that differs from its registration
is logged on every evaluation until it is synced.
"""

import dagster as dg

from mdame_assets.partitions import dimension_partitions
from mdame_domain.dimensions import RegistryReader
from mdame_pipeline.dimension_registry import registry_drift
from mdame_resources.state import StateStoreResource
from mdame_runtime.partition_keys import DIMENSION_PARTITION

# Kept by the code server between ticks: only changed niche files are parsed again.
_FILES = RegistryReader()


@dg.sensor(
    minimum_interval_seconds=60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Every minute: adds each active registered dimension to the `dimension` "
    "partitions. It only reads: a niche file that differs from its registration is logged as "
    "a warning on every evaluation until `mdame dimensions sync` registers it.",
)
def dimension_registry_sensor(
    context: dg.SensorEvaluationContext, state: StateStoreResource
) -> dg.SensorResult:
    view = registry_drift(state.get_client(), files=_FILES)
    for error in view.errors:
        context.log.error(error)
    for line in view.drift:
        context.log.warning(line)
    known = set(context.instance.get_dynamic_partitions(DIMENSION_PARTITION))
    new = [slug for slug in view.active if slug not in known]
    # Deactivated dimensions keep their partition (and history); the schedule skips them.
    requests = [dimension_partitions.build_add_request(new)] if new else []
    unsynced = f"; {len(view.drift)} files not synced" if view.drift else ""
    return dg.SensorResult(
        dynamic_partitions_requests=requests,
        skip_reason=None if new else f"{len(view.active)} dimensions, none new{unsynced}",
    )
