"""The GPU location on dagster-celery: real Redis, real worker processes (queues dagster and
gpu), a real run of scene_clips. Where each step ran, and what a worker killed mid-step with
SIGKILL leaves behind once a supervisor starts it again."""

from __future__ import annotations

import socket
import time
from collections import Counter
from typing import Any

import dagster as dg
import psycopg

from tests.cluster.conftest import (
    CPU_WORKER,
    GPU_WORKER,
    KILL_KEY,
    ROUTING_KEY,
    Cluster,
    wait_for,
)
from tests.cluster.gpu_location import generations


def _run_id(cluster: Cluster, partition: str, after: float) -> str | None:
    with cluster.instance() as instance:
        for record in instance.get_run_records(
            dg.RunsFilter(tags={"dagster/partition": partition})
        ):
            if record.create_timestamp.timestamp() >= after:
                return record.dagster_run.run_id
    return None


def _celery_placements(cluster: Cluster, run_id: str) -> dict[str, set[str]]:
    """step key -> the Celery workers (node names) that executed it, from the engine events
    dagster-celery's task writes ("Executing steps ... in celery worker")."""
    placements: dict[str, set[str]] = {}
    with cluster.instance() as instance:
        for entry in instance.all_logs(run_id):
            event = entry.dagster_event
            if event is None or not event.is_engine_event:
                continue
            if "in celery worker" not in (event.message or ""):
                continue
            metadata = event.engine_event_data.metadata
            node = metadata["Celery worker"].value
            placements.setdefault(str(event.step_key), set()).add(str(node))
    return placements


def _run_status(cluster: Cluster, run_id: str) -> dg.DagsterRunStatus:
    with cluster.instance() as instance:
        run = instance.get_run_by_id(run_id)
        assert run is not None
        return run.status


def _rows(url: str, query: str, args: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, args).fetchall()


def _finish(proc: Any, cluster: Cluster, tag: str, timeout: float) -> None:
    try:
        code = proc.wait(timeout)
    except Exception:  # noqa: BLE001 - report the run's log, then fail
        proc.kill()
        code = None
    log = (cluster.home / "logs" / f"run-{tag}.log").read_text(errors="replace")
    assert code == 0, (
        f"run {tag} exit {code}:\n{log[-6000:]}\n--- gpu worker:\n"
        f"{cluster.workers[GPU_WORKER].tail()}\n--- cpu worker:\n"
        f"{cluster.workers[CPU_WORKER].tail()}"
    )


def test_gpu_steps_run_on_the_gpu_worker(celery_cluster: Cluster) -> None:
    cluster = celery_cluster
    host = socket.gethostname()
    started = time.time()
    logs = cluster.generation_dir / "routing"
    logs.mkdir()
    proc = cluster.materialize(ROUTING_KEY, {"log_dir": str(logs)}, "routing")
    _finish(proc, cluster, "routing", 240)
    run_id = _run_id(cluster, ROUTING_KEY, started)
    assert run_id and _run_status(cluster, run_id) == dg.DagsterRunStatus.SUCCESS
    placements = _celery_placements(cluster, run_id)
    assert placements, "no step ran in a celery worker"
    gpu_node, cpu_node = f"{GPU_WORKER}@{host}", f"{CPU_WORKER}@{host}"
    with cluster.instance() as instance:
        plan_tags = _step_tags(instance, run_id)
    for step, nodes in placements.items():
        on_gpu = plan_tags.get(step, {}).get("dagster-celery/queue") == "gpu"
        expected = gpu_node if on_gpu else cpu_node
        assert nodes == {expected}, (step, nodes)
    assert gpu_node in set().union(*placements.values())
    made = generations(logs)
    assert made and {worker for _, _, worker in made} == {GPU_WORKER}


def _step_tags(instance: dg.DagsterInstance, run_id: str) -> dict[str, dict[str, str]]:
    run = instance.get_run_by_id(run_id)
    assert run is not None and run.execution_plan_snapshot_id
    snapshot = instance.get_execution_plan_snapshot(run.execution_plan_snapshot_id)
    return {step.key: {t.key: t.value for t in step.tags} for step in snapshot.steps}


def test_gpu_worker_killed_mid_step_converges(celery_cluster: Cluster) -> None:
    cluster = celery_cluster
    host = socket.gethostname()
    started = time.time()
    logs = cluster.generation_dir / "kill"
    logs.mkdir()
    proc = cluster.materialize(KILL_KEY, {"log_dir": str(logs), "delay_s": 3.0}, "kill")
    # Mid-generation: a scene started on the gpu worker and not finished.
    wait_for(
        "a generation in progress",
        lambda: any(e == "start" for e, _, _ in generations(logs)),
        timeout=180,
    )
    killed_at = time.monotonic()
    cluster.workers[GPU_WORKER].killpg()
    in_progress = [h for e, h, _ in generations(logs) if e == "start"]
    # A supervisor starts it again (systemd's Restart=always, a few seconds later).
    cluster.start_worker(GPU_WORKER, "gpu", gpu=0)
    _finish(proc, cluster, "kill", 300)
    converged_s = time.monotonic() - killed_at
    run_id = _run_id(cluster, KILL_KEY, started)
    assert run_id and _run_status(cluster, run_id) == dg.DagsterRunStatus.SUCCESS
    made = generations(logs)
    done = Counter(h for e, h, _ in made if e == "done")
    assert done and max(done.values()) == 1, f"a scene generated twice: {done}"
    assert in_progress[-1] in done, "the scene being generated at the kill was never made"
    assert {w for _, _, w in made} == {GPU_WORKER}
    # Nothing stuck: no run left STARTED, no pool slot held, no scene job left running.
    with cluster.instance() as instance:
        live = instance.get_run_records(
            dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.STARTING])
        )
        assert not live
    slots = _rows(
        cluster.dagster_db.owner, "SELECT run_id FROM concurrency_slots WHERE run_id IS NOT NULL"
    )
    assert not slots, slots
    pending = _rows(cluster.dagster_db.owner, "SELECT run_id, step_key FROM pending_steps")
    assert not pending, pending
    running = _rows(cluster.db.owner, "SELECT id FROM mdame.jobs WHERE status = 'running'")
    assert not running, running
    print(f"converged {converged_s:.1f}s after the kill")
