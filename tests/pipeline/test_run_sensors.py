"""Dagster-native orchestration, against a real instance and database: run status sensors
finish pipeline_runs rows; hop sensors skip partitions whose run is queued or in progress,
re-request nothing new while nothing changed, and retry a partition that made no progress after
a capped backoff for as long as its day is in the retry window; the jobs retry transient errors
with a RetryPolicy."""

from __future__ import annotations

import uuid
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import psycopg
import pytest
import yaml

from mdame_assets import gpu, orchestrator
from mdame_assets.defs.hops import (
    RETRY_BACKOFF_ENV,
    RETRY_WINDOW_DAYS_ENV,
    ended_at,
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
from mdame_assets.gpu_defs.clips.sensors import make_scene_jobs_sensor
from mdame_assets.jobs import DIMENSION_TAG, transient_retry
from mdame_assets.partitions import content_partitions
from mdame_core.settings import REPO_ROOT
from mdame_domain.retry_window import RetryWindow
from mdame_runtime.partition_keys import partition_key
from tests import runkit

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
    return runkit.add_run(instance, status, job_name, key)


def fail_runs(instance, count: int, key: str = KEY) -> list[dg.RunRecord]:
    return runkit.fail_runs(instance, count, "scene_clips_job", key)


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
    return make_scene_jobs_sensor()(context)


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


@pytest.fixture
def records(tmp_path):
    """An instance for run records alone (the retry rule's tests need no database)."""
    with runkit.quick_instance(tmp_path / "events") as instance:
        yield instance


def window_holding(day: date, **backoff: float) -> RetryWindow:
    """A retry window that still holds `day` today (the test partition's day is fixed)."""
    return RetryWindow(days=(datetime.now(UTC).date() - day).days + 1, **backoff)


# The partition's newest update, before any of its runs (the content run that planned it).
PLANNED_AT = datetime(2026, 11, 29, 10, 5, tzinfo=UTC)


def test_a_partition_that_failed_ten_times_in_a_row_is_retried_after_its_backoff_in_the_window(
    records,
):
    runs = fail_runs(records, 10)
    window = window_holding(DAY, backoff_s=120.0, backoff_max_s=3600.0)
    ended = ended_at(runs[0])
    wait_s = window.backoff(KEY, 10)
    assert 0.8 * 3600 <= wait_s <= 3600  # ten doublings of 120 s: at the cap
    soon = hop_decision("clips", KEY, PLANNED_AT, runs, ended + timedelta(seconds=60), window)
    assert soon.run_key is None and "retry 10" in soon.reason and "backoff" in soon.reason
    later = ended + timedelta(seconds=wait_s + 1)
    decision = hop_decision("clips", KEY, PLANNED_AT, runs, later, window)
    assert decision.run_key == f"clips:{KEY}:{PLANNED_AT.isoformat()}:retry10"
    # The same facts give the same run_key: a repeated evaluation requests nothing new.
    assert hop_decision("clips", KEY, PLANNED_AT, runs, later, window) == decision

    closed = hop_decision(
        "clips", KEY, PLANNED_AT, runs, window.closes_at(DAY) + timedelta(hours=1), window
    )
    assert (
        closed.run_key is None and "left the" in closed.reason and "retry window" in closed.reason
    )


def test_a_failed_run_that_touched_the_partition_waits_its_backoff_but_a_later_change_does_not(
    records,
):
    runs = fail_runs(records, 5)
    window = window_holding(DAY, backoff_s=120.0, backoff_max_s=3600.0)
    # The newest failed run updated the partition's rows before failing: the update is its own.
    touched = runs[0].create_timestamp
    assert ended_at(runs[0]) >= touched
    ended = ended_at(runs[0])
    soon = hop_decision("clips", KEY, touched, runs, ended + timedelta(seconds=1), window)
    assert soon.run_key is None and "retry 5" in soon.reason
    later = ended + timedelta(seconds=window.backoff(KEY, 5) + 1)
    retried = hop_decision("clips", KEY, touched, runs, later, window)
    assert retried.run_key == f"clips:{KEY}:{touched.isoformat()}"
    assert "5 failed run(s) in a row" in retried.reason

    # A change after the last run ended (an operator re-armed the work): new work, at once,
    # even for a day long out of the retry window.
    rearmed = ended + timedelta(minutes=5)
    far = datetime.now(UTC) + timedelta(days=30)
    fresh = hop_decision("clips", KEY, rearmed, runs, far, window)
    assert fresh.run_key == f"clips:{KEY}:{rearmed.isoformat()}"


def test_the_hop_sensor_retries_by_its_settings_and_says_when_the_window_closed(
    planned, monkeypatch
):
    fail_runs(planned.instance, 3)
    fail_runs(planned.instance, 1, key="2026-11-28|science")  # another partition's: not counted
    monkeypatch.setenv(RETRY_BACKOFF_ENV, "0.001")
    days_ago = (datetime.now(UTC).date() - DAY).days
    monkeypatch.setenv(RETRY_WINDOW_DAYS_ENV, str(days_ago))
    first, again = evaluate(planned), evaluate(planned)
    [request] = first.run_requests
    assert request.partition_key == KEY and request.run_key.endswith(":retry3")
    assert [r.run_key for r in again.run_requests] == [request.run_key]

    monkeypatch.setenv(RETRY_WINDOW_DAYS_ENV, str(days_ago - 1))
    closed = evaluate(planned)
    assert closed.run_requests == []
    assert "left the" in closed.skip_reason.skip_message
    assert f"{days_ago - 1}-day retry window" in closed.skip_reason.skip_message


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
        (orchestrator.defs(), "content_job"),
        (gpu.defs(), "scene_clips_job"),
        (orchestrator.defs(), "publishing_job"),
    ):
        policy = defs.resolve_job_def(name).op_retry_policy
        assert policy == transient_retry()
    assert transient_retry().backoff == dg.Backoff.EXPONENTIAL
    assert transient_retry().jitter == dg.Jitter.PLUS_MINUS
    assert transient_retry().max_retries >= 3


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
    jobs_policy = transient_retry()
    policy = dg.RetryPolicy(
        max_retries=jobs_policy.max_retries,
        delay=0.1,
        backoff=jobs_policy.backoff,
        jitter=jobs_policy.jitter,
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
