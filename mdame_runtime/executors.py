"""Where each code location's steps run, chosen by configuration: MDAME_GPU_EXECUTOR for the GPU
location, MDAME_ORCHESTRATOR_EXECUTOR for the orchestrator's (both default to in_process).

- `in_process` and `multiprocess`: the steps run beside the run worker; the `gpu` pool
  (dagster.yaml) keeps generation to one step at a time.
- `celery`: dagster-celery with a Redis broker; GPU steps go to the `gpu` queue, render and probe
  steps to the `render` queue, every other step to dagster-celery's default queue `dagster`.
  Workers: `mdame celery-worker`.
- `k8s`: dagster-k8s' k8s_job_executor; GPU steps request `nvidia.com/gpu`, render steps CPU.

URLs and secrets reach the executors only as environment variable names (`{"env": NAME}` in
the executor config, `env_secrets` for pods), so no value is in the definitions, the UI or a log.

Steps of a Celery or k8s run pass their outputs through storage every worker reaches:
`MDAME_DAGSTER_IO_URL` (`s3://bucket/prefix?endpoint_url=...`) for several hosts; unset, the
filesystem IO manager under DAGSTER_HOME, enough for workers on the orchestrator's host.
deploy/ and docs/deployment.md show the whole set-up.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import dagster as dg

from mdame_core import settings
from mdame_domain.media_url import MediaUrlError, S3MediaUrl, parse_media_url

EXECUTOR_ENV = "MDAME_GPU_EXECUTOR"
ORCHESTRATOR_EXECUTOR_ENV = "MDAME_ORCHESTRATOR_EXECUTOR"
GPU_QUEUE = "gpu"
# Encodes and their probes: CPU-bound minutes per video, scaled out on hosts of their own.
RENDER_QUEUE = "render"
RENDER_CPU_ENV, RENDER_MEMORY_ENV = "MDAME_K8S_RENDER_CPU", "MDAME_K8S_RENDER_MEMORY"
GPU_POOL = "gpu"
# dagster-celery's own default queue (dagster_celery.defaults.task_default_queue): steps without
# a queue tag go there, so the CPU worker listens on it.
DEFAULT_QUEUE = "dagster"

CELERY_BROKER_ENV = "MDAME_CELERY_BROKER_URL"
CELERY_BACKEND_ENV = "MDAME_CELERY_BACKEND_URL"
CELERY_VISIBILITY_ENV = "MDAME_CELERY_VISIBILITY_TIMEOUT_S"
# Its default is longer than any GPU step can take: a step still running when it lapses is handed
# to a second worker (the generation lease in PostgreSQL keeps that from generating twice, but
# the work would be wasted). It is also how long a step of a killed worker waits before it is
# redelivered.

# A GPU run that outlives this is failed by the daemon's run monitoring (Dagster's
# `dagster/max_runtime` tag), and the run-failure sensor alerts the operator: a queue no worker
# consumes, or a worker that never answers, ends in an alert instead of a run waiting forever.
# Its default is longer than the visibility timeout's, so a killed worker's step can still come
# back in time.
GPU_RUN_MAX_ENV = "MDAME_GPU_RUN_MAX_S"
MAX_RUNTIME_TAG = "dagster/max_runtime"

K8S_IMAGE_ENV = "MDAME_K8S_IMAGE"
K8S_NAMESPACE_ENV = "MDAME_K8S_NAMESPACE"
K8S_ENV_SECRETS_ENV = "MDAME_K8S_ENV_SECRETS"
K8S_KUBECONFIG_ENV = "MDAME_K8S_KUBECONFIG"
# Non-secret settings a step pod needs, copied from the run worker's environment by name;
# database URLs and keys go through the Kubernetes Secrets named in MDAME_K8S_ENV_SECRETS.
K8S_FORWARDED_ENV = (
    "ENV",
    "MDAME_PROVIDERS",
    EXECUTOR_ENV,
    ORCHESTRATOR_EXECUTOR_ENV,
    "MDAME_MEDIA_URL",
    "MDAME_DIFFUSERS_MODEL_DIR",
    "MDAME_MODEL_DIR",
    "MDAME_DAGSTER_IO_URL",
)

IO_URL_ENV = "MDAME_DAGSTER_IO_URL"

# Tags every GPU step carries, whatever the executor: celery routes on the queue tag, k8s reads
# its per-step container config; the in-process executor ignores both.
GPU_STEP_TAGS: dict[str, Any] = {
    "dagster-celery/queue": GPU_QUEUE,
    "dagster-k8s/config": {
        "container_config": {"resources": {"limits": {"nvidia.com/gpu": 1}}},
    },
}


# Tags of the render and probe steps: celery routes them to the `render` queue. What a k8s step
# pod of theirs requests (MDAME_K8S_RENDER_CPU, MDAME_K8S_RENDER_MEMORY) is in the k8s
# executor's per-step config, built when the definitions load (k8s_config), so these tags are
# the same whatever the settings.
RENDER_STEP_TAGS: dict[str, Any] = {"dagster-celery/queue": RENDER_QUEUE}


def render_op_names(defs: dg.Definitions) -> list[str]:
    """The ops of the assets and checks in `defs` that carry the render steps' tags."""
    names = set()
    for item in [*(defs.assets or ()), *(defs.asset_checks or ())]:
        if not isinstance(item, dg.AssetsDefinition) or not item.is_executable:
            continue
        if not isinstance(item.node_def, dg.OpDefinition):
            continue
        if item.op.tags.get("dagster-celery/queue") == RENDER_QUEUE:
            names.add(item.op.name)
    return sorted(names)


def render_pod_config() -> dict[str, Any]:
    """A render step pod's container config: the CPU and memory an encode requests."""
    requests = {
        "cpu": settings.get(RENDER_CPU_ENV),
        "memory": settings.get(RENDER_MEMORY_ENV),
    }
    return {"container_config": {"resources": {"requests": requests}}}


def ensure_pool_limit(instance: dg.DagsterInstance, pool: str) -> None:
    """Creates `pool`'s limit row (dagster.yaml's default limit) unless it exists. Dagster
    creates it on the pool's first claim, and two runs claiming a pool for the first time at
    once race on that insert: one of them fails with a unique violation. Whoever launches the
    pool's runs calls this first."""
    storage = instance.event_log_storage
    if pool not in storage.get_concurrency_keys():
        storage.initialize_concurrency_limit_to_default(pool)


class ExecutorConfigError(ValueError):
    """The environment names an executor that cannot be built as configured."""


def executor_name(var: str = EXECUTOR_ENV) -> str:
    """The executor MDAME_GPU_EXECUTOR or MDAME_ORCHESTRATOR_EXECUTOR names; a name it does not
    take raises SettingsError naming the variable, the value and the choices."""
    return str(settings.get(var))


def _require(var: str, why: str) -> None:
    if not settings.is_set(var):
        raise ExecutorConfigError(f"{var} must be set: {why}")


def gpu_run_tags() -> dict[str, str]:
    """Tags of every run of the GPU location's job: its longest allowed runtime."""
    return {MAX_RUNTIME_TAG: str(settings.get(GPU_RUN_MAX_ENV))}


def require_celery_env() -> None:
    _require(CELERY_BROKER_ENV, "the Redis broker, e.g. redis://127.0.0.1:6379/0")
    _require(CELERY_BACKEND_ENV, "the result backend, e.g. the broker's URL")


def celery_config() -> dict[str, Any]:
    """The celery executor's config, which is also the `execution.config` block of the workers'
    YAML (`dagster-celery worker start -y`): the two sides must agree on broker and settings."""
    return {
        # Both always named, never defaulted one to the other: executor and workers resolve
        # them in their own environments, and a backend they disagree on would hang the run.
        "broker": {"env": CELERY_BROKER_ENV},
        "backend": {"env": CELERY_BACKEND_ENV},
        "config_source": {
            # A message is acknowledged only once its step has finished: a worker killed
            # mid-step (host lost, OOM) leaves it unacknowledged, and Redis hands it to the next
            # worker once the visibility timeout has passed. Without this the task is lost and
            # the run waits on its result forever.
            "task_acks_late": True,
            # A pool child that dies (segfault, OOM kill) while its worker lives: requeue now.
            "task_reject_on_worker_lost": True,
            # A worker takes one step at a time: none waits, reserved, behind a long GPU step.
            "worker_prefetch_multiplier": 1,
            # With acks_late the message is redelivered after a lost broker connection anyway;
            # cancelling the running copy keeps it from finishing twice.
            "worker_cancel_long_running_tasks_on_connection_loss": True,
            "broker_connection_retry_on_startup": True,
            "broker_transport_options": {
                "visibility_timeout": settings.get(CELERY_VISIBILITY_ENV),
                # How often a live worker looks for messages of dead ones (one ZRANGE).
                "unacked_restore_interval": 5,
                "unacked_restore_throttle": 1,
                # dagster-celery's defaults for publishing retries (replaced, not merged).
                "max_retries": 3,
                "interval_start": 0,
                "interval_step": 0.2,
                "interval_max": 0.5,
            },
        },
    }


def celery_worker_settings() -> dict[str, Any]:
    """A worker's Celery settings: the executor's config with the URLs resolved from the
    environment (mdame_runtime/celery_worker_config/dagster_celery_config.py reads them)."""
    require_celery_env()
    return {
        "broker_url": settings.get(CELERY_BROKER_ENV),
        "result_backend": settings.get(CELERY_BACKEND_ENV),
        **celery_config()["config_source"],
    }


def celery_worker_yaml() -> dict[str, Any]:
    """What `dagster-celery worker start -y FILE` reads (deploy/celery.yaml is a copy)."""
    return {"execution": {"config": celery_config()}}


def k8s_config(render_ops: Iterable[str] = ()) -> dict[str, Any]:
    """The k8s_job_executor's config: image and namespace from the environment; secrets only as
    the names of Kubernetes Secrets mounted as environment variables. The ops in `render_ops`
    (render_op_names) request the CPU and memory of an encode."""
    config: dict[str, Any] = {
        "job_image": {"env": K8S_IMAGE_ENV},
        "job_namespace": settings.get(K8S_NAMESPACE_ENV),
        "env_vars": [name for name in K8S_FORWARDED_ENV if settings.is_set(name)],
        "env_secrets": [
            s.strip() for s in settings.raw(K8S_ENV_SECRETS_ENV).split(",") if s.strip()
        ],
    }
    if render_ops:
        config["per_step_k8s_config"] = {name: render_pod_config() for name in render_ops}
    kubeconfig = settings.raw(K8S_KUBECONFIG_ENV)
    if kubeconfig:  # the run worker runs outside the cluster
        config.update(load_incluster_config=False, kubeconfig_file=kubeconfig)
    return config


def gpu_executor() -> dg.ExecutorDefinition:
    return _executor(executor_name(EXECUTOR_ENV))


def orchestrator_executor(render_ops: Iterable[str] = ()) -> dg.ExecutorDefinition:
    """in_process unless configured otherwise. A partition's steps form one chain, so a process
    per step (multiprocess, Dagster's default) buys no parallelism, and each of those processes
    imports Dagster and loads the definitions again: measured on a content run of 7 steps,
    about 29 s of CPU against 4.5 s in process. celery or k8s send the render and probe steps
    (`render_ops`) to render hosts."""
    return _executor(executor_name(ORCHESTRATOR_EXECUTOR_ENV), render_ops)


def _executor(name: str, render_ops: Iterable[str] = ()) -> dg.ExecutorDefinition:
    if name == "in_process":
        return dg.in_process_executor
    if name == "multiprocess":
        return dg.multiprocess_executor
    if name == "celery":
        require_celery_env()
        from dagster_celery import celery_executor

        return celery_executor.configured(celery_config(), name="mdame_celery")
    _require(K8S_IMAGE_ENV, "the image step pods run")
    from dagster_k8s import k8s_job_executor

    return k8s_job_executor.configured(k8s_config(render_ops), name="mdame_k8s")


def io_bucket(url: str) -> S3MediaUrl:
    """The bucket, prefix and endpoint of MDAME_DAGSTER_IO_URL: the media store's URL grammar
    (`s3://bucket/prefix?endpoint_url=...&region=...`), which must name a bucket here."""
    try:
        parsed = parse_media_url(url)
    except MediaUrlError as exc:
        raise ExecutorConfigError(f"{IO_URL_ENV}: {exc}") from None
    if not isinstance(parsed, S3MediaUrl):
        raise ExecutorConfigError(f"{IO_URL_ENV} must look like s3://bucket/prefix")
    return parsed


def step_io_manager() -> Any:
    """The IO manager a location's steps pass outputs through. Celery and k8s steps run in
    other processes, maybe on other hosts: they need storage they all reach."""
    url = settings.raw(IO_URL_ENV)
    if not url:
        # Dagster's default, files under $DAGSTER_HOME/storage: shared by every process of one
        # host (and by several hosts only if that folder is a shared mount).
        return dg.FilesystemIOManager()
    bucket = io_bucket(url)
    from dagster_aws.s3 import S3PickleIOManager, S3Resource

    # Credentials come from boto3's own chain (AWS_ACCESS_KEY_ID... or an instance role).
    return S3PickleIOManager(
        s3_resource=S3Resource(endpoint_url=bucket.endpoint_url, region_name=bucket.region),
        s3_bucket=bucket.bucket,
        s3_prefix=bucket.prefix or "dagster",
    )
