"""Each location's executor comes from the environment (MDAME_GPU_EXECUTOR,
MDAME_ORCHESTRATOR_EXECUTOR); what each value builds, where the steps' tags route them, and
the Kubernetes job spec dagster-k8s renders for a GPU, a render and a CPU step (no cluster).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster._core.execution.api import create_execution_plan
from dagster_k8s import K8sRunLauncher, k8s_job_executor
from dagster_k8s.container_context import K8sContainerContext
from dagster_k8s.job import (
    UserDefinedDagsterK8sConfig,
    construct_dagster_k8s_job,
    get_user_defined_k8s_config,
)

from mdame_core import settings
from mdame_core.settings import SettingsError
from mdame_runtime import executors
from mdame_runtime.executors import (
    GPU_STEP_TAGS,
    RENDER_STEP_TAGS,
    ExecutorConfigError,
    gpu_executor,
    orchestrator_executor,
    render_op_names,
)

REPO = Path(__file__).resolve().parents[2]
CELERY_ENV = {
    "MDAME_CELERY_BROKER_URL": "redis://127.0.0.1:6399/0",
    "MDAME_CELERY_BACKEND_URL": "redis://127.0.0.1:6399/1",
}


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch):
    for name in (
        executors.EXECUTOR_ENV,
        executors.ORCHESTRATOR_EXECUTOR_ENV,
        executors.RENDER_CPU_ENV,
        executors.RENDER_MEMORY_ENV,
        *CELERY_ENV,
        executors.CELERY_VISIBILITY_ENV,
        executors.K8S_IMAGE_ENV,
        executors.K8S_NAMESPACE_ENV,
        executors.K8S_ENV_SECRETS_ENV,
        executors.K8S_KUBECONFIG_ENV,
        executors.IO_URL_ENV,
        executors.GPU_RUN_MAX_ENV,
    ):
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.mark.parametrize(
    ("value", "name"),
    [(None, "in_process"), ("", "in_process"), ("in_process", "in_process"),
     ("multiprocess", "multiprocess")],
)  # fmt: skip
def test_embedded_executors(env, value: str | None, name: str) -> None:
    if value is not None:
        env.setenv(executors.EXECUTOR_ENV, value)
    assert gpu_executor().name == name


@pytest.mark.parametrize("value", ["celery-redis", "gpu", "dask", "k8s_job", "inprocess"])
def test_unknown_executor_is_refused_by_name(env, value: str) -> None:
    env.setenv(executors.EXECUTOR_ENV, value)
    with pytest.raises(SettingsError) as refused:
        gpu_executor()
    assert str(refused.value) == (
        f"MDAME_GPU_EXECUTOR={value!r} is not allowed: it takes one of in_process, "
        "multiprocess, celery, k8s"
    )


def test_orchestrator_executor_from_the_environment(env) -> None:
    assert orchestrator_executor().name == "in_process"
    env.setenv(executors.ORCHESTRATOR_EXECUTOR_ENV, "multiprocess")
    assert orchestrator_executor().name == "multiprocess"
    env.setenv(executors.ORCHESTRATOR_EXECUTOR_ENV, "celery")
    with pytest.raises(ExecutorConfigError, match="MDAME_CELERY_BROKER_URL must be set"):
        orchestrator_executor()
    for name, value in CELERY_ENV.items():
        env.setenv(name, value)
    assert orchestrator_executor().name == "mdame_celery"
    env.setenv(executors.ORCHESTRATOR_EXECUTOR_ENV, "dask")
    with pytest.raises(SettingsError, match="MDAME_ORCHESTRATOR_EXECUTOR='dask' is not allowed"):
        orchestrator_executor()


def test_render_and_probe_steps_go_to_the_render_queue(env) -> None:
    """The publishing job's plan as the executor receives it: the encode and the checks that
    decode it are routed to `render`; voice and the publications to the default queue."""
    from mdame_assets.orchestrator import defs

    location = defs()
    plan = create_execution_plan(location.resolve_job_def("publishing_job"))
    queues = {
        step.key: dict(step.tags or {}).get("dagster-celery/queue")
        for step in plan.get_all_steps_in_topo_order()
    }
    assert queues["renders"] == queues["render_quality"] == executors.RENDER_QUEUE, queues
    assert queues["voice_tracks"] is None and queues["publications"] is None, queues
    render_steps = {
        "renders",
        "render_quality",
        "renders_text_on_screen",  # it decodes the render's picture
        "renders_scene_timing",  # it decodes a render it did not measure as it was encoded
    }
    assert {key for key, queue in queues.items() if queue == executors.RENDER_QUEUE} == (
        render_steps
    )
    # The same steps' pods are sized by the k8s executor, which the location builds with them.
    assert set(render_op_names(location)) == render_steps


def test_celery_executor_needs_broker_and_backend(env) -> None:
    env.setenv(executors.EXECUTOR_ENV, "celery")
    with pytest.raises(ExecutorConfigError, match="MDAME_CELERY_BROKER_URL must be set"):
        gpu_executor()
    env.setenv("MDAME_CELERY_BROKER_URL", CELERY_ENV["MDAME_CELERY_BROKER_URL"])
    with pytest.raises(ExecutorConfigError, match="MDAME_CELERY_BACKEND_URL must be set"):
        gpu_executor()
    env.setenv(executors.CELERY_VISIBILITY_ENV, "soon")
    env.setenv("MDAME_CELERY_BACKEND_URL", CELERY_ENV["MDAME_CELERY_BACKEND_URL"])
    with pytest.raises(SettingsError, match="MDAME_CELERY_VISIBILITY_TIMEOUT_S='soon'"):
        gpu_executor()


def test_gpu_runs_carry_the_runtime_limit_run_monitoring_enforces(env) -> None:
    from dagster._core.storage.tags import MAX_RUNTIME_SECONDS_TAG

    from mdame_assets.gpu import defs

    # The tag Dagster's run monitoring reads (a GPU run waiting on a queue no worker consumes
    # is failed after it, and the run-failure sensor alerts).
    assert executors.MAX_RUNTIME_TAG == MAX_RUNTIME_SECONDS_TAG
    job = defs().resolve_job_def("scene_clips_job")
    run_max = settings.default(executors.GPU_RUN_MAX_ENV)
    assert job.tags[MAX_RUNTIME_SECONDS_TAG] == str(run_max)
    assert run_max > settings.default(executors.CELERY_VISIBILITY_ENV)
    env.setenv(executors.GPU_RUN_MAX_ENV, "900")
    assert executors.gpu_run_tags() == {MAX_RUNTIME_SECONDS_TAG: "900"}
    assert defs().resolve_job_def("scene_clips_job").tags[MAX_RUNTIME_SECONDS_TAG] == "900"
    for bad in ("0", "-5", "2h", "1.5"):
        env.setenv(executors.GPU_RUN_MAX_ENV, bad)
        with pytest.raises(SettingsError, match=f"MDAME_GPU_RUN_MAX_S='{bad}' is not allowed"):
            executors.gpu_run_tags()


def _executor_instance(executor_def: dg.ExecutorDefinition) -> Any:
    """The executor a run would build from this definition (config resolved as at run start)."""
    from dagster._core.definitions.job_base import InMemoryJob
    from dagster._core.executor.init import InitExecutorContext
    from dagster._core.system_config.objects import ResolvedRunConfig

    @dg.op
    def noop() -> None:
        pass

    @dg.job(executor_def=executor_def)
    def probe() -> None:
        noop()

    resolved = ResolvedRunConfig.build(probe, {})
    with dg.instance_for_test() as instance:
        return executor_def.executor_creation_fn(  # type: ignore[misc]
            InitExecutorContext(
                job=InMemoryJob(probe),
                executor_def=executor_def,
                executor_config=resolved.execution.execution_engine_config,
                instance=instance,
            )
        )


def test_celery_executor_settings_resolved_from_the_environment(env) -> None:
    from dagster_celery.executor import CeleryExecutor

    env.setenv(executors.EXECUTOR_ENV, "celery")
    for name, value in CELERY_ENV.items():
        env.setenv(name, value)
    env.setenv(executors.CELERY_VISIBILITY_ENV, "45")
    definition = gpu_executor()
    assert definition.name == "mdame_celery"
    built = _executor_instance(definition)
    assert isinstance(built, CeleryExecutor)
    assert built.broker == CELERY_ENV["MDAME_CELERY_BROKER_URL"]
    assert built.backend == CELERY_ENV["MDAME_CELERY_BACKEND_URL"]
    source = built.config_source
    assert source.task_acks_late is True
    assert source.task_reject_on_worker_lost is True
    assert source.worker_prefetch_multiplier == 1
    assert source.broker_transport_options["visibility_timeout"] == 45
    # The URLs are in the definition only as variable names.
    assert "redis://" not in json.dumps(executors.celery_config())


def test_deploy_celery_yaml_is_the_executors_config(env) -> None:
    """Workers read deploy/celery.yaml (or what `mdame celery-worker` writes, the same): it
    must stay what the executor is configured with, or workers and runs disagree."""
    shipped = yaml.safe_load((REPO / "deploy" / "celery.yaml").read_text())
    assert shipped == executors.celery_worker_yaml()
    from dagster_celery.cli import get_validated_config

    for name, value in CELERY_ENV.items():
        env.setenv(name, value)
    validated = get_validated_config(str(REPO / "deploy" / "celery.yaml"))
    assert validated["broker"] == CELERY_ENV["MDAME_CELERY_BROKER_URL"]


def test_k8s_executor_needs_an_image(env) -> None:
    env.setenv(executors.EXECUTOR_ENV, "k8s")
    with pytest.raises(ExecutorConfigError, match="MDAME_K8S_IMAGE must be set"):
        gpu_executor()
    env.setenv(executors.K8S_IMAGE_ENV, "registry.example/mdame:1")
    assert gpu_executor().name == "mdame_k8s"


def _kubeconfig(tmp_path: Path) -> Path:
    """A kubeconfig naming a server nothing here talks to: building a spec loads it, only."""
    path = tmp_path / "kubeconfig"
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "test-key-not-secret"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    return path


def _step_job_spec(
    exc_cfg: dict[str, Any], tags: dict[str, str], kubeconfig: Path, op_name: str = ""
) -> Any:
    """What K8sStepHandler.launch_step builds for a step with these tags, through the same
    dagster-k8s code: the executor's container context, merged with the step's tag config,
    then with the executor's per-step config of the step's op."""
    per_op = exc_cfg.get("per_step_k8s_config", {}).get(op_name, {})
    container_context = (
        K8sContainerContext(
            env_secrets=exc_cfg.get("env_secrets"),
            env_vars=exc_cfg.get("env_vars"),
            namespace=exc_cfg.get("job_namespace"),
            run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(
                exc_cfg.get("step_k8s_config", {})
            ),
        )
        .merge(K8sContainerContext(run_k8s_config=get_user_defined_k8s_config(tags)))
        .merge(K8sContainerContext(run_k8s_config=UserDefinedDagsterK8sConfig.from_dict(per_op)))
    )
    launcher = K8sRunLauncher(
        service_account_name="dagster",
        instance_config_map="dagster-instance",
        dagster_home="/opt/dagster/dagster_home",
        load_incluster_config=False,
        kubeconfig_file=str(kubeconfig),
    )
    job_config = container_context.get_k8s_job_config(exc_cfg["job_image"], launcher)
    return construct_dagster_k8s_job(
        job_config=job_config,
        args=["dagster", "api", "execute_step"],
        job_name="dagster-step-test",
        user_defined_k8s_config=container_context.run_k8s_config,
    )


def _limits(job: Any) -> dict[str, Any]:
    container = job.spec.template.spec.containers[0]
    return dict((container.resources.limits if container.resources else None) or {})


def test_k8s_job_spec_requests_a_gpu_for_gpu_steps_only(env, tmp_path: Path) -> None:
    env.setenv(executors.EXECUTOR_ENV, "k8s")
    env.setenv(executors.K8S_IMAGE_ENV, "registry.example/mdame:1")
    env.setenv(executors.K8S_NAMESPACE_ENV, "mdame")
    env.setenv(executors.K8S_ENV_SECRETS_ENV, "mdame-db, mdame-s3")
    env.setenv("MDAME_MEDIA_URL", "s3://clips/mdame?endpoint_url=http://minio:9000")
    processed = process_config(k8s_job_executor.config_schema.config_type, executors.k8s_config())
    assert processed.success, processed.errors
    exc_cfg = processed.value
    assert exc_cfg["job_image"] == "registry.example/mdame:1"
    assert exc_cfg["env_secrets"] == ["mdame-db", "mdame-s3"]
    assert "MDAME_MEDIA_URL" in exc_cfg["env_vars"]

    @dg.op(tags=GPU_STEP_TAGS)
    def gpu_step() -> int:
        return 1

    @dg.op
    def cpu_step(x: int) -> int:
        return x

    @dg.job
    def steps() -> None:
        cpu_step(gpu_step())

    # Step tags as the executor receives them: from the execution plan (dicts JSON-encoded).
    plan = create_execution_plan(steps)
    tags = {key: dict(plan.get_step_by_key(key).tags) for key in ("gpu_step", "cpu_step")}
    kubeconfig = _kubeconfig(tmp_path)
    gpu_job = _step_job_spec(exc_cfg, tags["gpu_step"], kubeconfig)
    cpu_job = _step_job_spec(exc_cfg, tags["cpu_step"], kubeconfig)
    # Kubernetes quantities are strings in the API model ("1"), whatever the tag held.
    assert _limits(gpu_job)["nvidia.com/gpu"] == "1"
    assert "nvidia.com/gpu" not in _limits(cpu_job)
    container = gpu_job.spec.template.spec.containers[0]
    assert container.image == "registry.example/mdame:1"
    secret_refs = [e.secret_ref.name for e in container.env_from or [] if e.secret_ref]
    assert secret_refs == ["mdame-db", "mdame-s3"]


def test_k8s_job_spec_requests_cpu_for_render_steps(env, tmp_path: Path) -> None:
    env.setenv(executors.K8S_IMAGE_ENV, "registry.example/mdame:1")
    env.setenv(executors.RENDER_CPU_ENV, "4")
    processed = process_config(
        k8s_job_executor.config_schema.config_type, executors.k8s_config(["render_step"])
    )
    assert processed.success, processed.errors

    @dg.op(tags=RENDER_STEP_TAGS)
    def render_step() -> int:
        return 1

    @dg.job
    def steps() -> None:
        render_step()

    tags = dict(create_execution_plan(steps).get_step_by_key("render_step").tags)
    job = _step_job_spec(processed.value, tags, _kubeconfig(tmp_path), "render_step")
    resources = job.spec.template.spec.containers[0].resources
    assert dict(resources.requests) == {"cpu": "4", "memory": "2Gi"}
    assert "nvidia.com/gpu" not in _limits(job)


def test_io_manager_from_the_environment(env) -> None:
    from dagster_aws.s3 import S3PickleIOManager

    assert isinstance(executors.step_io_manager(), dg.FilesystemIOManager)
    env.setenv(executors.IO_URL_ENV, "s3://mdame-io/runs?endpoint_url=http://127.0.0.1:9000")
    manager = executors.step_io_manager()
    assert isinstance(manager, S3PickleIOManager)
    assert (manager.s3_bucket, manager.s3_prefix) == ("mdame-io", "runs")
    assert manager.s3_resource.endpoint_url == "http://127.0.0.1:9000"
    for bad in ("http://x/y", "s3:///nobucket", "s3://b/p?endpoint=http://x"):
        env.setenv(executors.IO_URL_ENV, bad)
        with pytest.raises(ExecutorConfigError, match="MDAME_DAGSTER_IO_URL"):
            executors.step_io_manager()


def test_production_workspace_serves_both_locations_over_grpc(env) -> None:
    """deploy/workspace.prod.yaml is a valid Dagster workspace naming the same two locations
    as workspace.yaml, each through a grpc_server entry (hosts and ports from the
    environment). docs/deployment.md shows them loaded by the daemon and the webserver."""
    from dagster._core.workspace.config_schema import process_workspace_config

    prod = yaml.safe_load((REPO / "deploy" / "workspace.prod.yaml").read_text())
    dev = yaml.safe_load((REPO / "workspace.yaml").read_text())
    env.setenv("MDAME_GPU_CODE_SERVER_HOST", "gpu-location.internal")
    env.setenv("MDAME_GPU_CODE_SERVER_PORT", "4001")
    assert not process_workspace_config(prod).success  # the orchestrator's address is unset
    env.setenv("MDAME_ORCHESTRATOR_CODE_SERVER_HOST", "orchestrator.internal")
    env.setenv("MDAME_ORCHESTRATOR_CODE_SERVER_PORT", "4000")
    assert process_workspace_config(prod).success
    entries = {e["grpc_server"]["location_name"]: e["grpc_server"] for e in prod["load_from"]}
    names = {e["python_module"]["location_name"] for e in dev["load_from"]}
    assert set(entries) == names == {"orchestrator", "gpu"}
    assert entries["gpu"]["port"] == {"env": "MDAME_GPU_CODE_SERVER_PORT"}


def test_a_worker_on_an_unknown_queue_is_refused_by_name(env) -> None:
    """A worker listening on a queue no step is routed to would wait forever, unnoticed."""
    import subprocess
    import sys

    for name, value in CELERY_ENV.items():
        env.setenv(name, value)
    done = subprocess.run(
        [sys.executable, "-m", "mdame_cli.main", "celery-worker", "--queue", "dagster,rendr"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 1
    assert "'rendr' is not one of gpu, render, dagster" in done.stderr
