"""Where the GPU location's steps run, chosen by configuration (MDAME_GPU_EXECUTOR).

- `in_process` (the embedded default on one machine) and `multiprocess`: the steps run beside
  the run worker; the `gpu` pool (dagster.yaml) keeps generation to one step at a time.
- `celery`: dagster-celery with a Redis broker; GPU steps go to the `gpu` queue.
- `k8s`: dagster-k8s' k8s_job_executor; GPU steps request `nvidia.com/gpu`.
"""

from __future__ import annotations

import os
from typing import Any

import dagster as dg

EXECUTOR_ENV = "MDAME_GPU_EXECUTOR"
GPU_QUEUE = "gpu"
GPU_POOL = "gpu"

# Tags every GPU step carries, whatever the executor: celery routes on the queue tag, k8s reads
# its per-step container config; the in-process executor ignores both.
GPU_STEP_TAGS: dict[str, Any] = {
    "dagster-celery/queue": GPU_QUEUE,
    "dagster-k8s/config": {
        "container_config": {"resources": {"limits": {"nvidia.com/gpu": 1}}},
    },
}


def gpu_executor() -> dg.ExecutorDefinition:
    name = os.environ.get(EXECUTOR_ENV, "in_process") or "in_process"
    if name == "in_process":
        return dg.in_process_executor
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name in ("celery", "k8s"):
        raise NotImplementedError(f"{EXECUTOR_ENV}={name}: being built (issue 10)")
    raise ValueError(
        f"{EXECUTOR_ENV} must be in_process, multiprocess, celery or k8s, not {name!r}"
    )
