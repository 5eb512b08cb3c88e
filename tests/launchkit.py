"""Runs created and launched as the daemon does: a code location loaded through Dagster's
workspace (a code server of its own per location), a run created from its remote job, and
`instance.launch_run`, which hands it to the instance's run launcher. The run-server tests and
`bench/scale.py --launched` use it."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import dagster as dg

from tests.leftovers import descendants, describe, stop

REPO = Path(__file__).resolve().parents[1]


@contextmanager
def workspace(instance: dg.DagsterInstance, location: str | None = None) -> Iterator[Any]:
    """The request context of the repository's workspace.yaml (both locations), or of one
    location, each loaded as the daemon loads it."""
    from dagster._core.workspace.context import WorkspaceProcessContext
    from dagster._core.workspace.load_target import ModuleTarget, WorkspaceFileTarget

    from mdame_runtime.run_server import location_module

    target: Any = (
        WorkspaceFileTarget(paths=[str(REPO / "workspace.yaml")])
        if location is None
        else ModuleTarget(
            module_name=location_module(location),
            attribute=None,
            working_directory=str(REPO),
            location_name=location,
        )
    )
    before = descendants(os.getpid())
    try:
        with WorkspaceProcessContext(instance, target) as context:
            yield context.create_request_context()
    finally:
        # Dagster asks its code servers to stop only once the runs they started have ended, and
        # a server that misses that keeps running: the test's own are stopped here.
        servers = {
            pid for pid in descendants(os.getpid()) - before if "dagster api grpc" in describe(pid)
        }
        stop(servers, grace_s=3.0)


def launch(
    instance: dg.DagsterInstance,
    request: Any,
    location: str,
    job_name: str,
    tags: Mapping[str, str] | None = None,
) -> str:
    """Create a run of the location's job as a sensor would, and launch it."""
    code_location = request.get_code_location(location)
    repository = next(iter(code_location.get_repositories().values()))
    remote_job = repository.get_full_job(job_name)
    plan = code_location.get_execution_plan(
        remote_job, {}, step_keys_to_execute=None, known_state=None, instance=instance
    )
    run = instance.create_run(
        job_name=job_name,
        run_id=None,
        run_config={},
        resolved_op_selection=None,
        step_keys_to_execute=None,
        status=dg.DagsterRunStatus.NOT_STARTED,
        op_selection=None,
        root_run_id=None,
        parent_run_id=None,
        tags={**(remote_job.run_tags or {}), **(tags or {})},
        job_snapshot=remote_job.job_snapshot,
        execution_plan_snapshot=plan.execution_plan_snapshot,
        parent_job_snapshot=remote_job.parent_job_snapshot,
        remote_job_origin=remote_job.get_remote_origin(),
        job_code_origin=remote_job.get_python_origin(),
        asset_selection=None,
        asset_check_selection=None,
        asset_graph=repository.asset_graph,
    )
    instance.launch_run(run.run_id, request)
    return run.run_id


def wait_finished(
    instance: dg.DagsterInstance, run_id: str, timeout: float = 120, every: float = 0.1
) -> dg.DagsterRun:
    import time

    deadline = time.monotonic() + timeout
    while True:
        run = instance.get_run_by_id(run_id)
        if run is not None and run.is_finished:
            return run
        if time.monotonic() > deadline:
            raise AssertionError(f"run {run_id} not finished after {timeout}s")
        time.sleep(every)
