"""The GPU location's liveness sweep: with the DefaultRunLauncher its runs' workers are
subprocesses of its code server, on its host, which may not be the orchestrator's."""

from mdame_assets.liveness_sensor import make_liveness_sensor

gpu_liveness_sensor = make_liveness_sensor("gpu_liveness_sensor")
