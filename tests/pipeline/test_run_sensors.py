"""Dagster-native orchestration, against a real instance and database: run status sensors
finish pipeline_runs rows; hop sensors skip partitions whose run is queued or in progress,
re-request nothing new while nothing changed, and retry a partition that made no progress a
bounded number of times after a backoff; the jobs retry transient errors with a RetryPolicy."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import psycopg
import pytest
import yaml

from mdame_assets import gpu, orchestrator
from mdame_assets.defs.clips.sensors import scene_jobs_sensor
from mdame_assets.defs.hops import (
    MAX_CONSECUTIVE_FAILURES,
    MAX_RETRIES,
    PARTITION_NAME_TAG,
    RETRY_BACKOFF_S,
    hop_decision,
)
from mdame_assets.defs.run_sensors import (
    MONITORED_JOBS,
    run_canceled_sensor,
    run_failed_sensor,
    run_succeeded_sensor,
)
from mdame_assets.defs.scenes.assets import scene_plan
from mdame_assets.defs.scripts.assets import scripts
from mdame_assets.defs.topics.assets import topics
from mdame_assets.defs.trends.assets import trends
from mdame_assets.jobs import DIMENSION_TAG, TRANSIENT_RETRY, partition_tags
from mdame_assets.partitions import content_partitions, partition_key
from mdame_core.settings import REPO_ROOT

DAY = date(2026, 11, 29)
KEY = str(partition_key(DAY, "science"))


@dg.op
def tiny_op() -> None:
    pass


@dg.job
def tiny_job():
    tiny_op()


def pipeline_row_status(pipeline, run_id: str) -> str:
    [(status,)] = pipeline.state._select(
        "SELECT status FROM mdame.pipeline_runs WHERE execution_id = %s", [uuid.UUID(run_id)]
    )
    return status


def add_run(instance, status, job_name="scene_clips_job", key=KEY) -> dg.DagsterRun:
    run = dg.DagsterRun(
        job_name=job_name,
        run_id=str(uuid.uuid4()),
        status=status,
        tags={PARTITION_NAME_TAG: key, **partition_tags(key)},
    )
    instance.add_run(run)
    return run


# -- run status sensors ----------------------------------------------------------------------
def test_sensors_monitor_the_jobs_of_both_code_locations():
    assert {(s.location_name, s.job_name) for s in MONITORED_JOBS} == {
        ("orchestrator", "content_job"),
        ("orchestrator", "publishing_job"),
        ("gpu", "scene_clips_job"),
    }
    for sensor in (run_succeeded_sensor, run_failed_sensor, run_canceled_sensor):
        assert sensor.default_status == dg.DefaultSensorStatus.RUNNING


def test_run_status_sensors_finish_the_runs_pipeline_row(pipeline):
    pipeline.sync()
    state = {"state": pipeline.resources["state"]}

    ok = tiny_job.execute_in_process(instance=pipeline.instance)
    pipeline.state.start_pipeline_run(ok.run_id, "science", KEY, None)
    [success] = pipeline.instance.get_records_for_run(
        ok.run_id, of_type=dg.DagsterEventType.RUN_SUCCESS
    ).records
    context = dg.build_run_status_sensor_context(
        sensor_name=run_succeeded_sensor.name,
        dagster_event=success.event_log_entry.dagster_event,
        dagster_instance=pipeline.instance,
        dagster_run=pipeline.instance.get_run_by_id(ok.run_id),
        resources=state,
    )
    assert pipeline_row_status(pipeline, ok.run_id) == "running"
    run_succeeded_sensor(context)
    assert pipeline_row_status(pipeline, ok.run_id) == "succeeded"
    run_succeeded_sensor(context)  # a repeated tick changes nothing
    assert pipeline_row_status(pipeline, ok.run_id) == "succeeded"

    failed = add_run(pipeline.instance, dg.DagsterRunStatus.STARTED)
    pipeline.state.start_pipeline_run(failed.run_id, "science", KEY, None)
    event = pipeline.instance.report_run_failed(failed, "boom")
    context = dg.build_run_status_sensor_context(
        sensor_name=run_failed_sensor.name,
        dagster_event=event,
        dagster_instance=pipeline.instance,
        dagster_run=pipeline.instance.get_run_by_id(failed.run_id),
        resources=state,
    ).for_run_failure()
    run_failed_sensor(context)
    assert pipeline_row_status(pipeline, failed.run_id) == "failed"


def test_a_run_that_ended_before_any_stage_started_its_row_is_not_an_error(pipeline):
    run = add_run(pipeline.instance, dg.DagsterRunStatus.STARTED)
    event = pipeline.instance.report_run_failed(run, "failed before its first step")
    context = dg.build_run_status_sensor_context(
        sensor_name=run_failed_sensor.name,
        dagster_event=event,
        dagster_instance=pipeline.instance,
        dagster_run=pipeline.instance.get_run_by_id(run.run_id),
        resources={"state": pipeline.resources["state"]},
    ).for_run_failure()
    assert "nothing to record" in str(run_failed_sensor(context))


# -- hop sensors ---------------------------------------------------------------------------
@pytest.fixture
def planned(pipeline):
    """science's 2026-11-29 content made: its scripts await their clips."""
    pipeline.sync()
    assert dg.materialize(
        [trends, topics, scripts, scene_plan],
        partition_key=KEY,
        instance=pipeline.instance,
        resources=pipeline.resources,
    ).success
    return pipeline


def evaluate(pipeline) -> dg.SensorResult:
    context = dg.build_sensor_context(
        instance=pipeline.instance, resources={"state": pipeline.resources["state"]}
    )
    return scene_jobs_sensor(context)


def test_hop_sensor_requests_one_tagged_run_and_the_same_key_on_every_tick(planned):
    first, again = evaluate(planned), evaluate(planned)
    [request] = first.run_requests
    assert request.partition_key == KEY
    assert request.tags["mdame/partition"] == "2026-11-29_science"
    assert [r.run_key for r in again.run_requests] == [request.run_key]
    assert "retry" not in request.run_key


@pytest.mark.parametrize(
    "status",
    [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED],
    ids=["queued", "starting", "started"],
)
def test_hop_sensor_requests_nothing_while_the_partitions_run_is_pending(planned, status):
    if status == dg.DagsterRunStatus.QUEUED:
        # A queued run needs its origin; a NOT_STARTED one stands for it (both are pending).
        status = dg.DagsterRunStatus.NOT_STARTED
    pending = add_run(planned.instance, status)
    result = evaluate(planned)
    assert result.run_requests == []
    assert "queued or in progress" in result.skip_reason.skip_message
    # Another partition's run or another job's run does not hold this one back.
    planned.instance.delete_run(pending.run_id)
    add_run(planned.instance, dg.DagsterRunStatus.STARTED, key="2026-11-28|science")
    add_run(planned.instance, dg.DagsterRunStatus.STARTED, job_name="content_job")
    assert len(evaluate(planned).run_requests) == 1


def record_of(instance, run: dg.DagsterRun) -> dg.RunRecord:
    return instance.get_run_record_by_id(run.run_id)


def test_a_partition_that_made_no_progress_is_retried_after_a_backoff_a_bounded_number_of_times(
    planned,
):
    instance = planned.instance
    [work] = planned.state.partitions_with_scripts_in(("planned",))
    runs: list[dg.RunRecord] = []
    now = datetime.now(UTC)

    for n in range(1, MAX_RETRIES + 1):
        run = add_run(instance, dg.DagsterRunStatus.STARTED)
        instance.report_run_failed(run, "no progress")
        runs.insert(0, record_of(instance, run))
        ended = datetime.fromtimestamp(runs[0].end_time, UTC)
        soon = hop_decision("clips", KEY, work.last_update, runs, ended + timedelta(seconds=1))
        assert soon.run_key is None and "backoff" in soon.reason
        later = ended + timedelta(seconds=RETRY_BACKOFF_S * 2 ** (n - 1) + 1)
        decision = hop_decision("clips", KEY, work.last_update, runs, later)
        assert decision.run_key and decision.run_key.endswith(f":retry{n}")

    run = add_run(instance, dg.DagsterRunStatus.STARTED)
    instance.report_run_failed(run, "no progress")
    runs.insert(0, record_of(instance, run))
    gave_up = hop_decision("clips", KEY, work.last_update, runs, now + timedelta(days=1))
    assert gave_up.run_key is None and "no progress" in gave_up.reason


def test_progress_starts_a_fresh_run_key_but_failures_in_a_row_stop_for_good(planned):
    instance = planned.instance
    [work] = planned.state.partitions_with_scripts_in(("planned",))
    runs = []
    for _ in range(MAX_CONSECUTIVE_FAILURES):
        run = add_run(instance, dg.DagsterRunStatus.STARTED)
        instance.report_run_failed(run, "failed after touching its rows")
        runs.insert(0, record_of(instance, run))
    far = datetime.now(UTC) + timedelta(days=1)
    # As if the partition had changed after every one of them: still not retried forever.
    progressed = far - timedelta(hours=1)
    decision = hop_decision("clips", KEY, progressed, runs, far)
    assert decision.run_key is None and "in a row" in decision.reason
    # With fewer failures, the change is new work with its own run key.
    fresh = hop_decision("clips", KEY, progressed, runs[:1], far)
    assert fresh.run_key == f"clips:{KEY}:{progressed.isoformat()}"


def test_every_run_of_a_partition_carries_the_dimension_tag_the_run_queue_limits(pipeline):
    """Dagster derives it from the partition key for sensor and schedule requests, backfills
    and in-process runs alike; dagster.yaml allows one run per value of it."""
    config = yaml.safe_load((REPO_ROOT / "dagster.yaml").read_text())
    [limit] = config["concurrency"]["runs"]["tag_concurrency_limits"]
    assert limit == {"key": DIMENSION_TAG, "value": {"applyLimitPerUniqueValue": True}, "limit": 1}

    pipeline.sync()
    result = tiny_partitioned.execute_in_process(partition_key=KEY, instance=pipeline.instance)
    assert result.dagster_run.tags[DIMENSION_TAG] == "science"


@dg.asset(partitions_def=content_partitions)
def tiny_asset() -> None:
    pass


tiny_partitioned = dg.Definitions(
    assets=[tiny_asset], jobs=[dg.define_asset_job("tiny_partitioned", selection=[tiny_asset])]
).resolve_job_def("tiny_partitioned")


# -- retry policy ----------------------------------------------------------------------------
@pytest.fixture
def live_instance():
    # Loading definitions reads Dagster's current defs-state storage, a process global that
    # points at the last instance created: keep one alive (earlier tests' are disposed).
    with dg.instance_for_test() as instance:
        yield instance


def test_every_job_retries_with_backoff_and_jitter(live_instance):
    for defs, name in (
        (orchestrator.defs, "content_job"),
        (gpu.defs, "scene_clips_job"),
        (orchestrator.defs, "publishing_job"),
    ):
        policy = defs.resolve_job_def(name).op_retry_policy
        assert policy == TRANSIENT_RETRY
    assert TRANSIENT_RETRY.backoff == dg.Backoff.EXPONENTIAL
    assert TRANSIENT_RETRY.jitter == dg.Jitter.PLUS_MINUS
    assert TRANSIENT_RETRY.max_retries >= 3


calls: list[str] = []


@dg.asset
def flaky() -> None:
    calls.append("flaky")
    if len(calls) == 1:
        raise psycopg.OperationalError("server closed the connection unexpectedly")


@dg.asset
def permanent() -> None:
    calls.append("permanent")
    raise dg.Failure("the dimension is not in the registry", allow_retries=False)


def run_with_policy(asset, instance) -> dg.ExecuteInProcessResult:
    # The jobs' own policy, with the delay shortened so the test does not sleep for seconds.
    policy = dg.RetryPolicy(
        max_retries=TRANSIENT_RETRY.max_retries,
        delay=0.1,
        backoff=TRANSIENT_RETRY.backoff,
        jitter=TRANSIENT_RETRY.jitter,
    )
    job = dg.define_asset_job("retrying", selection=[asset.key], op_retry_policy=policy)
    return (
        dg.Definitions(assets=[asset], jobs=[job])
        .resolve_job_def("retrying")
        .execute_in_process(raise_on_error=False)
    )


def test_a_transient_error_is_retried_and_a_permanent_failure_is_not(live_instance):
    calls.clear()
    assert run_with_policy(flaky, live_instance).success
    assert calls == ["flaky", "flaky"]

    calls.clear()
    assert not run_with_policy(permanent, live_instance).success
    assert calls == ["permanent"]
