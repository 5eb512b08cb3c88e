"""The liveness sweep on a persistent instance (PostgreSQL storage): a run whose process is gone
is failed and its gpu slot freed; a live owner, a reused pid and other hosts are told apart."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import uuid

import dagster as dg
import pytest
from dagster._core.events import EngineEventData
from liveness_kit import World

from mdame_assets.partitions import content_partitions
from mdame_core.state import StateStore
from mdame_resources.state import StateStoreResource
from mdame_runtime.liveness import (
    HOST_TAG,
    PID_TAG,
    START_SLACK_S,
    STARTED_TAG,
    process_alive,
    process_tags,
    sweep,
)
from mdame_runtime.partition_keys import DIMENSION_PARTITION
from mdame_runtime.step import read_step
from tests.adminkit import as_admin


def dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def add_run(instance: dg.DagsterInstance, status: dg.DagsterRunStatus, tags: dict) -> str:
    run_id = str(uuid.uuid4())
    instance.add_run(
        dg.DagsterRun(job_name="scene_clips_job", run_id=run_id, status=status, tags=tags)
    )
    return run_id


def hold_gpu_slot(instance: dg.DagsterInstance, run_id: str) -> None:
    storage = instance.event_log_storage
    storage.initialize_concurrency_limit_to_default("gpu")
    claim = storage.claim_concurrency_slot("gpu", run_id, "scene_clips")
    assert claim.is_claimed, claim


@pytest.fixture
def instance(world: World):
    with world.instance() as instance:
        yield instance


def test_process_identity_tells_a_live_owner_from_a_dead_one_and_a_reused_pid():
    mine = process_tags()
    assert process_alive(mine) is True
    assert process_alive({**mine, PID_TAG: str(dead_pid())}) is False
    # The same pid, started at another time: a reused pid, not the run's owner.
    assert process_alive({**mine, STARTED_TAG: mine[STARTED_TAG] + "1"}) is False
    assert process_alive({**mine, HOST_TAG: "some-other-host"}) is None


def test_a_dead_runs_slot_is_freed_and_the_run_failed(world: World, instance):
    dead = add_run(
        instance, dg.DagsterRunStatus.STARTED, {**process_tags(), PID_TAG: str(dead_pid())}
    )
    hold_gpu_slot(instance, dead)
    assert instance.event_log_storage.get_concurrency_run_ids() == {dead}

    # A second claimant waits behind it, as the sixth demo's scene_clips did.
    waiting = str(uuid.uuid4())
    assert not instance.event_log_storage.claim_concurrency_slot(
        "gpu", waiting, "scene_clips"
    ).is_claimed

    state = StateStore(world.app_url, env="dev")
    try:
        report = sweep(instance, state)
    finally:
        state.close()

    assert report.failed_runs == [dead]
    run = instance.get_run_by_id(dead)
    assert run.status == dg.DagsterRunStatus.FAILURE
    failure = instance.get_records_for_run(dead, of_type=dg.DagsterEventType.RUN_FAILURE).records
    assert "liveness sweep" in failure[0].event_log_entry.message
    # Its slot is free now: the waiting claimant gets it.
    assert instance.event_log_storage.claim_concurrency_slot(
        "gpu", waiting, "scene_clips"
    ).is_claimed


def test_live_runs_and_other_hosts_runs_are_left_alone(instance):
    live = add_run(instance, dg.DagsterRunStatus.STARTED, process_tags())
    hold_gpu_slot(instance, live)
    elsewhere = add_run(
        instance,
        dg.DagsterRunStatus.STARTED,
        {**process_tags(), HOST_TAG: "gpu-host-2", PID_TAG: str(dead_pid())},
    )
    # A run with no process of ours (submitted, not launched yet) is the daemon's to start.
    submitted = add_run(instance, dg.DagsterRunStatus.NOT_STARTED, {})

    report = sweep(instance)

    assert report.failed_runs == []
    for run_id in (live, elsewhere):
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED
    assert instance.get_run_by_id(submitted).status == dg.DagsterRunStatus.NOT_STARTED
    assert instance.event_log_storage.get_concurrency_run_ids() == {live}


def test_an_in_process_run_that_never_started_is_failed_when_its_owner_died(instance):
    orphan = add_run(
        instance, dg.DagsterRunStatus.NOT_STARTED, {**process_tags(), PID_TAG: str(dead_pid())}
    )
    assert sweep(instance).failed_runs == [orphan]
    assert instance.get_run_by_id(orphan).status == dg.DagsterRunStatus.FAILURE


def test_a_daemon_run_worker_is_judged_by_the_pid_it_reported(instance):
    """No process tags: the run worker's "Started process for run (pid: N)" engine event."""
    run_ids = {}
    for name, pid in (("dead", dead_pid()), ("live", os.getpid())):
        run_id = add_run(instance, dg.DagsterRunStatus.STARTED, {})
        run = instance.get_run_by_id(run_id)
        instance.report_engine_event(
            f"Started process for run (pid: {pid}).",
            run,
            EngineEventData.in_process(pid),
        )
        run_ids[name] = run_id
    # This test process started long before the runs: it counts as their live worker.
    report = sweep(instance)
    assert report.failed_runs == [run_ids["dead"]]
    assert instance.get_run_by_id(run_ids["live"]).status == dg.DagsterRunStatus.STARTED


def test_each_location_judges_only_the_run_workers_its_code_server_launched(instance):
    """With the DefaultRunLauncher a run worker is a subprocess of its location's code server,
    which may be on another host: a pid reported by the gpu location's worker means nothing
    on the orchestrator's host."""
    from dagster._core.remote_origin import (
        GrpcServerCodeLocationOrigin,
        RemoteJobOrigin,
        RemoteRepositoryOrigin,
    )

    origin = RemoteJobOrigin(
        RemoteRepositoryOrigin(
            GrpcServerCodeLocationOrigin(host="gpu-host", port=4001, location_name="gpu"),
            "__repository__",
        ),
        "scene_clips_job",
    )
    run_id = str(uuid.uuid4())
    run = instance.add_run(
        dg.DagsterRun(
            job_name="scene_clips_job",
            run_id=run_id,
            status=dg.DagsterRunStatus.STARTED,
            remote_job_origin=origin,
        )
    )
    pid = dead_pid()
    instance.report_engine_event(
        f"Started process for run (pid: {pid}).", run, EngineEventData.in_process(pid)
    )
    assert sweep(instance, location="orchestrator").failed_runs == []
    assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTED
    assert sweep(instance, location="gpu").failed_runs == [run_id]


def test_a_live_pid_that_started_after_the_run_is_not_its_worker(instance):
    run_id = add_run(instance, dg.DagsterRunStatus.STARTED, {})
    time.sleep(START_SLACK_S + 1.0)
    # The run's worker died and a later process got its pid.
    late = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        instance.report_engine_event(
            f"Started process for run (pid: {late.pid}).",
            instance.get_run_by_id(run_id),
            EngineEventData.in_process(late.pid),
        )
        assert sweep(instance).failed_runs == [run_id]
    finally:
        late.kill()
        late.wait()


def test_a_queued_run_whose_worker_is_starting_is_alive(instance):
    """A run queued for a while, then launched: its worker starts long after the run was
    created, and the run is STARTING until the worker's RUN_START. That worker is the owner."""
    run_id = add_run(instance, dg.DagsterRunStatus.STARTING, {})
    time.sleep(START_SLACK_S + 1.0)  # the time it spent in the queue
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        instance.report_engine_event(
            f"Started process for run (pid: {worker.pid}).",
            instance.get_run_by_id(run_id),
            EngineEventData.in_process(worker.pid),
        )
        assert sweep(instance).failed_runs == []
        assert instance.get_run_by_id(run_id).status == dg.DagsterRunStatus.STARTING
    finally:
        worker.kill()
        worker.wait()


def test_jobs_leased_by_a_dead_worker_go_back_to_the_queue(world: World, instance):
    state = StateStore(world.app_url, env="dev")
    try:
        host = socket.gethostname()
        # Scene steps claim their scene's job by key; a worker id is <host>:[<name>:]<pid>.
        owners = {
            "liveness-dead": f"{host}:{dead_pid()}",
            "liveness-named-dead": f"{host}:gpu-0:{dead_pid()}",
            "liveness-live": f"{host}:{os.getpid()}",
            "liveness-other": f"elsewhere:{dead_pid()}",
        }
        jobs = {}
        for key, owner in owners.items():
            jobs[key] = as_admin(state).enqueue_job("scene_clip", key, {"scene_hash": key})
            assert state.claim_scene_job(key, owner, 300).outcome == "claimed"

        dead = [jobs["liveness-dead"], jobs["liveness-named-dead"]]
        # The app role cannot give up another worker's lease (it lacks the claim's secret):
        # the operator's sweep does it, an app-only sweep leaves the jobs to their lease.
        assert sweep(instance, state).requeued_jobs == []
        assert sorted(sweep(instance, state, operator=as_admin(state)).requeued_jobs) == sorted(
            dead
        )
        assert [state.get_job(j).state for j in dead] == ["queued", "queued"]
        assert state.get_job(jobs["liveness-live"]).state == "running"
        # another host's sweep decides
        assert state.get_job(jobs["liveness-other"]).state == "running"
    finally:
        state.close()


def test_the_operators_sweep_releases_the_locks_of_ended_runs(world: World, instance):
    """A lock is released only with its holder's secret, which an ended run took with it: the
    operator's sweep releases it by its public token; an app-only sweep leaves it to its TTL."""
    state = StateStore(world.app_url, env="dev")
    try:
        ended = add_run(instance, dg.DagsterRunStatus.FAILURE, {})
        live = add_run(instance, dg.DagsterRunStatus.STARTED, process_tags())
        as_admin(state).upsert_dimension("tech", "Tech")
        as_admin(state).upsert_dimension("news", "News")
        assert state.acquire_pipeline_lock("pipeline:tech", f"{ended}:scripts", 600)
        assert state.acquire_pipeline_lock("pipeline:news", f"{live}:scripts", 600)
        assert sweep(instance, state).released_locks == []
        assert not state.get_lock("pipeline:tech").released
        swept = sweep(instance, state, operator=as_admin(state))
        assert swept.released_locks == ["pipeline:tech"]
        assert state.get_lock("pipeline:tech").released
        assert not state.get_lock("pipeline:news").released
    finally:
        state.close()


def _sessions(url: str) -> int:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


@pytest.mark.parametrize("held", [False, True])
def test_a_process_running_partitions_holds_its_storage_connections(world: World, held: bool):
    """dagster_postgres opens a connection per storage call; every process that runs our steps
    keeps them open (the first step holds them), as `mdame demo` does."""
    from mdame_runtime.step import hold_storage_connections

    with world.instance() as instance:
        if held:
            hold_storage_connections(instance)
        run_id = add_run(instance, dg.DagsterRunStatus.STARTED, {})
        time.sleep(1.0)  # the server counts a session once it has ended or is reported
        before = _sessions(world.dagster_url)
        for _ in range(20):
            instance.get_run_by_id(run_id)
            instance.get_run_records(dg.RunsFilter(run_ids=[run_id]))
        time.sleep(1.0)
        opened = _sessions(world.dagster_url) - before
    # Our own probe's connection is one of them.
    assert (opened <= 3) if held else (opened >= 40), opened


def test_a_run_worker_holds_its_storage_connections_from_its_first_step(world: World):
    """Run workers are Dagster's processes: the first of our steps to run in one makes its
    later storage calls reuse connections. Two runs of a step in one process: the second opens
    a few connections, not one per storage call."""

    @dg.asset(partitions_def=content_partitions)
    def probe(context, state: StateStoreResource) -> None:  # noqa: ANN001
        read_step(context, state.get_client(), "probe")  # "news" is registered in no registry

    def run_once(instance: dg.DagsterInstance) -> int:
        before = _sessions(world.dagster_url)
        dg.materialize(
            [probe],
            partition_key="2026-11-29|news",
            instance=instance,
            resources={"state": StateStoreResource(database_url=world.app_url)},
            raise_on_error=False,
        )
        time.sleep(1.0)
        return _sessions(world.dagster_url) - before

    with world.instance() as instance:
        instance.add_dynamic_partitions(DIMENSION_PARTITION, ["news"])
        first, second = run_once(instance), run_once(instance)
    assert first >= 20 and second <= 5, (first, second)
