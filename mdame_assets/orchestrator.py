"""The orchestrator code location: every CPU stage, its checks, the schedules and sensors, all
loaded from mdame_assets/defs/; the resources and the executor are added here."""

from __future__ import annotations

import os

import dagster as dg

import mdame_assets.defs
from mdame_assets.folders import load_folder
from mdame_assets.resources import shared_resources

ORCHESTRATOR_EXECUTOR_ENV = "MDAME_ORCHESTRATOR_EXECUTOR"


def orchestrator_executor() -> dg.ExecutorDefinition:
    """multiprocess (Dagster's default: a process per step) unless MDAME_ORCHESTRATOR_EXECUTOR
    is in_process: a partition's steps form one chain, so one process per run loses no
    parallelism and saves a process start per step (the UI browser test uses it)."""
    chosen = os.environ.get(ORCHESTRATOR_EXECUTOR_ENV) or "multiprocess"
    if chosen == "in_process":
        return dg.in_process_executor
    if chosen == "multiprocess":
        return dg.multiprocess_executor
    raise ValueError(
        f"{ORCHESTRATOR_EXECUTOR_ENV} must be in_process or multiprocess, not {chosen!r}"
    )


defs = dg.Definitions.merge(
    load_folder(mdame_assets.defs),
    dg.Definitions(resources=shared_resources(), executor=orchestrator_executor()),
)
