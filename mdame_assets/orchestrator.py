"""The orchestrator code location: every CPU stage, its checks, the schedules and sensors, all
loaded from mdame_assets/defs/; the resources and the executor are added here. Its executor
comes from configuration (MDAME_ORCHESTRATOR_EXECUTOR, mdame_runtime/executors.py)."""

from __future__ import annotations

import dagster as dg

import mdame_assets.defs
from mdame_assets.folders import load_folder
from mdame_assets.resources import shared_resources
from mdame_runtime.executors import orchestrator_executor, step_io_manager

defs = dg.Definitions.merge(
    load_folder(mdame_assets.defs),
    dg.Definitions(
        resources={**shared_resources(), "io_manager": step_io_manager()},
        executor=orchestrator_executor(),
    ),
)
