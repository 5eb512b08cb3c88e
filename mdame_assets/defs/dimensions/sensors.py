"""The registry sensor: dimension files -> PostgreSQL and the `dimension` dynamic partition."""

import dagster as dg

from mdame_assets.defs.dimensions.registry import sync_registry
from mdame_assets.partitions import DIMENSION_PARTITION, dimension_partitions
from mdame_resources.state import StateStoreResource


@dg.sensor(minimum_interval_seconds=60, default_status=dg.DefaultSensorStatus.RUNNING)
def dimension_registry_sensor(
    context: dg.SensorEvaluationContext, state: StateStoreResource
) -> dg.SensorResult:
    report = sync_registry(state.get_client())
    for error in report.errors:
        context.log.error(error)
    known = set(context.instance.get_dynamic_partitions(DIMENSION_PARTITION))
    new = [slug for slug in report.active if slug not in known]
    # Deactivated dimensions keep their partition (and history); the schedule skips them.
    requests = [dimension_partitions.build_add_request(new)] if new else []
    return dg.SensorResult(
        dynamic_partitions_requests=requests,
        skip_reason=None if new else f"{len(report.active)} dimensions, none new",
    )
