"""The orchestrator code location: every CPU stage, its checks, the schedules and sensors, all
loaded from mdame_assets/defs/; the resources and the executor are added here. Its executor
comes from configuration (MDAME_ORCHESTRATOR_EXECUTOR, mdame_runtime/executors.py).

The definitions are built by `defs()`, which Dagster calls as the location loads (`dagster api
grpc -m`, `dagster dev -w`, `dg check defs`, a run worker): the settings are read then, not when
this module is imported. Code that needs them calls `defs()`."""

from __future__ import annotations

import dagster as dg

import mdame_assets.defs
from mdame_assets.folders import load_location
from mdame_assets.resources import shared_resources
from mdame_runtime.executors import orchestrator_executor, render_op_names, step_io_manager


def _finish(folder: dg.Definitions) -> dg.Definitions:
    return dg.Definitions.merge(
        folder,
        dg.Definitions(
            resources={**shared_resources(), "io_manager": step_io_manager()},
            # The render and probe steps, found by their tags: a k8s executor sizes their pods.
            executor=orchestrator_executor(render_op_names(folder)),
        ),
    )


@dg.definitions
def defs() -> dg.Definitions:
    return load_location(mdame_assets.defs, _finish)
