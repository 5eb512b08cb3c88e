"""A Celery cluster on this machine, once per session: Redis started by scripts/redis-local.sh
on a free port, and Celery workers started by `mdame celery-worker` as an operator would
(queue `dagster`, queue `gpu` with CUDA_VISIBLE_DEVICES, and, started by the tests that need
them, queue `render`), all pointed at one MD-AME database and one Dagster instance on
PostgreSQL (DAGSTER_HOME on disk). Everything listens on 127.0.0.1 and is killed at teardown.

Partitions are prepared up to scene_plan in this process (offline providers); the GPU
location's scene_clips then runs as `dagster asset materialize` in a child process whose
executor is the celery one (MDAME_GPU_EXECUTOR=celery), with tests/cluster/gpu_location.py's
logged visuals; the orchestrator location's publishing stage runs the same way
(MDAME_ORCHESTRATOR_EXECUTOR=celery).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from mdame_cli.ui import free_port
from tests.adminkit import as_admin
from tests.childenv import child_environ
from tests.scratch_db import DbUrls, create_database, drop_database

REPO = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
DAY = date(2026, 11, 29)
# Short enough that a killed worker's step is redelivered within the test, longer than any
# step takes here (a step still running when it lapses would be handed out twice).
VISIBILITY_TIMEOUT_S = 20
GPU_WORKER, CPU_WORKER = "gpu0", "dagster"
JOB_LEASE_S = 8
# A killed render worker's pipeline lock lapses before its step is redelivered.
LOCK_TTL_S = 8


def wait_for(what: str, ready: Callable[[], Any], timeout: float, every: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


@dataclass
class Worker:
    name: str
    queue: str
    gpu: int | None
    log: Path
    proc: subprocess.Popen | None = None
    home: Path | None = None  # MDAME_HOME of a worker on 'another host'; None: the cluster's

    def killpg(self, signum: int = signal.SIGKILL) -> None:
        """The worker's whole process group (celery and its pool child): what
        losing the host, or `kill -9` of the service, does."""
        if self.proc is None:
            return
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signum)
        with suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def tail(self, lines: int = 60) -> str:
        if not self.log.exists():
            return ""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


@dataclass
class Cluster:
    db: DbUrls
    dagster_db: DbUrls
    home: Path
    redis_url: str
    env: dict[str, str]
    bucket: Any  # tests.s3kit.S3Bucket: the media store and the IO manager's prefix
    workers: dict[str, Worker] = field(default_factory=dict)

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    @property
    def generation_dir(self) -> Path:
        path = self.home / "generations"
        path.mkdir(exist_ok=True)
        return path

    def start_worker(
        self, name: str, queue: str, gpu: int | None = None, home: Path | None = None
    ) -> Worker:
        """`home`: the worker's own MDAME_HOME (media cache, scratch), as on another host."""
        worker = self.workers.get(name) or Worker(
            name, queue, gpu, self.home / "logs" / f"worker-{name}.log", home=home
        )
        worker.log.parent.mkdir(parents=True, exist_ok=True)
        command = [str(BIN / "mdame"), "celery-worker", "--queue", queue, "--name", name]
        if gpu is not None:
            command += ["--gpu", str(gpu)]
        else:
            command += ["--concurrency", "1"]  # 2 cores here; a real CPU worker takes more
        env = dict(self.env)
        if worker.home is not None:
            worker.home.mkdir(parents=True, exist_ok=True)
            env["MDAME_HOME"] = str(worker.home)
        out = open(worker.log, "ab")  # noqa: SIM115 - the child owns it
        worker.proc = subprocess.Popen(
            command, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        out.close()
        self.workers[name] = worker
        return worker

    def celery_app(self) -> Any:
        from celery import Celery

        return Celery("probe", broker=self.redis_url, backend=self.redis_url)

    def wait_workers(self, *names: str, timeout: float = 90) -> None:
        app = self.celery_app()
        host = socket.gethostname()

        def answered() -> bool:
            for name in names:
                proc = self.workers[name].proc
                if proc is not None and proc.poll() is not None:
                    raise AssertionError(
                        f"worker {name} exited {proc.returncode}:\n{self.workers[name].tail()}"
                    )
            replies = app.control.ping(timeout=0.5) or []
            seen = {node for reply in replies for node in reply}
            return all(f"{name}@{host}" in seen for name in names)

        try:
            wait_for(f"celery workers {names}", answered, timeout, every=0.5)
        finally:
            app.close()

    @contextmanager
    def instance(self) -> Iterator[dg.DagsterInstance]:
        saved = os.environ.get("MDAME_DAGSTER_DATABASE_URL")
        os.environ["MDAME_DAGSTER_DATABASE_URL"] = self.dagster_db.owner
        try:
            with dg.DagsterInstance.from_config(str(self.dagster_home)) as instance:
                yield instance
        finally:
            if saved is None:
                os.environ.pop("MDAME_DAGSTER_DATABASE_URL", None)
            else:
                os.environ["MDAME_DAGSTER_DATABASE_URL"] = saved

    def materialize(
        self, partition: str, visuals: dict[str, Any], tag: str, **env: str
    ) -> subprocess.Popen:
        """`dagster asset materialize` of the GPU location's scene_clips: this child is the
        run worker, and its executor sends the steps to the workers."""
        config = {"resources": {"visuals": {"config": visuals}}}
        return self._materialize(
            "tests.cluster.gpu_location", "scene_clips", partition, tag,
            ["--config-json", json.dumps(config)], env,
        )  # fmt: skip

    def materialize_publishing(self, partition: str, tag: str) -> subprocess.Popen:
        """The orchestrator location's publishing stage (voice, render and its checks, the
        publications), its steps sent to the workers by the location's celery executor."""
        return self._materialize(
            "mdame_assets.orchestrator", ",".join(PUBLISHING_ASSETS), partition, tag, [], {}
        )

    def _materialize(
        self,
        module: str,
        select: str,
        partition: str,
        tag: str,
        extra: list[str],
        env: dict[str, str],
    ) -> subprocess.Popen:
        command = [
            str(BIN / "dagster"), "asset", "materialize", "-m", module, "--select", select,
            "--partition", partition, *extra,
        ]  # fmt: skip
        log = self.home / "logs" / f"run-{tag}.log"
        out = open(log, "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(
            command, cwd=REPO, env={**self.env, **env}, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )  # fmt: skip
        out.close()
        return proc


def _prepare_partitions(cluster: Cluster, keys: list[str]) -> None:
    """trends .. scene_plan for each partition, in this process (offline providers)."""
    from mdame_assets import orchestrator
    from mdame_assets.jobs import CONTENT_GROUP
    from mdame_core.state import StateStore
    from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
    from mdame_resources.media import MediaStoreResource
    from mdame_resources.providers.selection import offline_providers
    from mdame_resources.state import StateStoreResource, close_clients
    from mdame_runtime.partition_keys import DIMENSION_PARTITION

    content = [
        a
        for a in orchestrator.defs().assets or ()
        if isinstance(a, dg.AssetsDefinition) and a.group_names_by_key.get(a.key) == CONTENT_GROUP
    ]
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("MDAME_HOME", str(cluster.home))
        mp.delenv("MDAME_MEDIA_ROOT", raising=False)
        cluster.bucket.apply(mp)
        with StateStore(cluster.db.app, env="dev") as state:
            sync_registry(as_admin(state), DIMENSIONS_DIR)
        try:
            with cluster.instance() as instance:
                instance.add_dynamic_partitions(
                    DIMENSION_PARTITION, sorted({k.split("|")[1] for k in keys})
                )
                for key in keys:
                    result = dg.materialize(
                        content,
                        partition_key=key,
                        instance=instance,
                        resources={
                            "state": StateStoreResource(database_url=cluster.db.app),
                            "media": MediaStoreResource(),
                            **offline_providers(),
                        },
                        raise_on_error=False,
                    )
                    assert result.success, [e.message for e in result.all_events if e.is_failure]
        finally:
            close_clients()


# The partition the cluster tests run (one run, shared: see test_celery.py).
ROUTING_KEY = f"{DAY.isoformat()}|science"
PUBLISHING_ASSETS = ("voice_tracks", "renders", "publications")


@pytest.fixture(scope="session")
def celery_cluster(
    template_db: str, moto_s3: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    bucket = moto_s3.new_bucket()
    db = create_database(template_db, "_celery")
    dagster_db = create_database(None, "_dagster")
    home = tmp_path_factory.mktemp("celery-home")
    (home / "dagster").mkdir()
    (home / "dagster" / "dagster.yaml").symlink_to(REPO / "dagster.yaml")
    port = free_port()
    redis_env = {**os.environ, "MDAME_HOME": str(home), "MDAME_REDIS_PORT": str(port)}
    redis_url = f"redis://127.0.0.1:{port}/0"
    env = child_environ("DAGSTER_", "AWS_")
    env.update(
        ENV="dev",
        PYTHONPATH=str(REPO),  # the workers import tests.cluster.gpu_location
        PYTHONUNBUFFERED="1",
        MDAME_DATABASE_URL=db.owner,
        MDAME_APP_DATABASE_URL=db.app,
        MDAME_DAGSTER_DATABASE_URL=dagster_db.owner,
        MDAME_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        MDAME_GPU_EXECUTOR="celery",
        MDAME_ORCHESTRATOR_EXECUTOR="celery",
        MDAME_CELERY_BROKER_URL=redis_url,
        MDAME_CELERY_BACKEND_URL=redis_url,
        MDAME_CELERY_VISIBILITY_TIMEOUT_S=str(VISIBILITY_TIMEOUT_S),
        # Step outputs through the object store, as on several hosts.
        MDAME_DAGSTER_IO_URL=f"s3://{bucket.name}/dagster-io?endpoint_url={bucket.endpoint}",
        # A killed worker's generation lease lapses within the test.
        MDAME_JOB_LEASE_S=str(JOB_LEASE_S),
        MDAME_LOCK_TTL_S=str(LOCK_TTL_S),
        OMP_NUM_THREADS="1",
        **bucket.env(),  # MDAME_MEDIA_URL (clips in the bucket) and dummy credentials
    )
    cluster = Cluster(db, dagster_db, home, redis_url, env, bucket)
    started = subprocess.run(
        [str(REPO / "scripts" / "redis-local.sh"), "start"],
        env=redis_env, capture_output=True, text=True,
    )  # fmt: skip
    try:
        assert started.returncode == 0, started.stderr
        cluster.start_worker(CPU_WORKER, "dagster")
        cluster.start_worker(GPU_WORKER, "gpu", gpu=0)
        _prepare_partitions(cluster, [ROUTING_KEY])
        cluster.wait_workers(CPU_WORKER, GPU_WORKER)
        yield cluster
    finally:
        for worker in cluster.workers.values():
            worker.killpg()
        subprocess.run(
            [str(REPO / "scripts" / "redis-local.sh"), "stop"], env=redis_env, capture_output=True
        )
        drop_database(db.name)
        drop_database(dagster_db.name)
