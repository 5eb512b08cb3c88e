"""The code locations' definitions follow the settings of the moment they load, not of the
moment their modules were imported: a sensor's interval, the jobs' retry policy and the GPU
job's executor are read when Dagster calls a location's `defs()`. A bad value stops the load
with a message naming the variable, its value and what it takes, through Dagster's own loader
as well.

Each case runs in a child Python, so that the imports it makes are its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mdame_core.settings import REPO_ROOT

FOLLOWS = """
import json, os

from mdame_assets import gpu, orchestrator  # imported with the settings of the parent

os.environ.update(
    MDAME_HOP_SENSOR_INTERVAL_S="7", MDAME_STEP_RETRIES="9", MDAME_GPU_EXECUTOR="multiprocess"
)
here, there = orchestrator.defs(), gpu.defs()
seen = {
    "intervals": sorted(
        {
            here.resolve_sensor_def("publishing_sensor").minimum_interval_seconds,
            here.resolve_sensor_def("content_retry_sensor").minimum_interval_seconds,
            there.resolve_sensor_def("scene_jobs_sensor").minimum_interval_seconds,
        }
    ),
    "retries": sorted(
        {
            here.resolve_job_def(name).op_retry_policy.max_retries
            for name in ("content_job", "publishing_job", "analytics_job", "weekly_operations_job")
        }
        | {there.resolve_job_def("scene_clips_job").op_retry_policy.max_retries}
    ),
    "gpu_executor": there.resolve_job_def("scene_clips_job").executor_def.name,
}
os.environ["MDAME_HOP_SENSOR_INTERVAL_S"] = "11"
seen["reloaded"] = gpu.defs().resolve_sensor_def("scene_jobs_sensor").minimum_interval_seconds
print(json.dumps(seen))
"""

REFUSED = """
import os

from mdame_assets import gpu

os.environ["MDAME_GPU_EXECUTOR"] = "gpu"
try:
    gpu.defs()
except Exception as exc:
    print(type(exc).__name__, exc)
"""

# The partitions are the one thing built once per process (every partitioned asset is defined
# with them): a later load that asks for another first day is refused, not silently ignored.
FIRST_DAY_FIXED = """
import os

from mdame_assets import orchestrator

orchestrator.defs()
os.environ["MDAME_FIRST_DAY"] = "2026-11-20"
try:
    orchestrator.defs()
except Exception as exc:
    print(type(exc).__name__, exc)
"""


def _env(tmp_path: Path, **values: str) -> dict[str, str]:
    env = {**os.environ, "ENV": os.environ.get("ENV", "dev"), "DAGSTER_HOME": str(tmp_path)}
    for name in (
        "MDAME_HOP_SENSOR_INTERVAL_S",
        "MDAME_STEP_RETRIES",
        "MDAME_GPU_EXECUTOR",
        "MDAME_ORCHESTRATOR_EXECUTOR",
    ):
        env.pop(name, None)
    return {**env, **values}


def _python(code: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_definitions_take_the_settings_of_their_load_not_of_their_import(tmp_path: Path) -> None:
    done = _python(FOLLOWS, _env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen == {
        "intervals": [7],
        "retries": [9],
        "gpu_executor": "multiprocess",
        "reloaded": 11,
    }


def test_a_bad_value_fails_the_load_naming_variable_value_and_choices(tmp_path: Path) -> None:
    done = _python(REFUSED, _env(tmp_path))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == (
        "SettingsError bad settings:\n  MDAME_GPU_EXECUTOR='gpu' is not allowed: it takes one "
        "of in_process, multiprocess, celery, k8s"
    )


def test_dagsters_loader_refuses_the_location_with_the_same_message(tmp_path: Path) -> None:
    """What `dagster api grpc -m` and `dagster dev` do with the module: Dagster's loader finds
    `defs`, calls it, and reports the error."""
    dagster = Path(sys.executable).with_name("dagster")
    done = subprocess.run(
        [str(dagster), "definitions", "validate", "-m", "mdame_assets.gpu"],
        cwd=REPO_ROOT,
        env=_env(tmp_path, MDAME_GPU_EXECUTOR="gpu"),
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode != 0
    assert (
        "MDAME_GPU_EXECUTOR='gpu' is not allowed: it takes one of in_process, multiprocess, "
        "celery, k8s" in done.stdout + done.stderr
    )


def test_a_later_load_with_another_first_day_is_refused(tmp_path: Path) -> None:
    done = _python(FIRST_DAY_FIXED, _env(tmp_path, MDAME_FIRST_DAY="2026-11-01"))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == (
        "SettingsError MDAME_FIRST_DAY='2026-11-20' is not the 2026-11-01 this process built its "
        "partitions with: start a new process to change it"
    )
