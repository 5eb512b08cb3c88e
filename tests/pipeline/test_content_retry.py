"""The content retry sensor, against a real database and Dagster instance: a partition of the
retry window whose newest content run failed is requested again after its backoff, the same
run_key on every evaluation, a new one after each new failure; a published partition, one whose
run is queued or in progress, and one whose day left the window are not."""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import dagster as dg
import pytest

from mdame_assets import orchestrator
from mdame_assets.defs.content_retry import make_content_retry_sensor
from mdame_assets.defs.hops import RETRY_BACKOFF_ENV, RETRY_WINDOW_DAYS_ENV
from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from mdame_pipeline.lifecycle import script_states
from mdame_pipeline.locks import held_lock
from mdame_resources.state import StateStoreResource, close_clients
from mdame_runtime.partition_keys import DIMENSION_PARTITION, partition_key
from tests import runkit
from tests.adminkit import as_admin

CONTENT_JOB = "content_job"


@dataclass
class Setup:
    state: StateStore
    instance: dg.DagsterInstance
    resource: StateStoreResource
    today: date

    def key(self, dimension: str, days_ago: int = 0) -> str:
        return str(partition_key(self.today - timedelta(days=days_ago), dimension))

    def evaluate(self) -> dg.SensorResult:
        context = dg.build_sensor_context(
            instance=self.instance, resources={"state": self.resource}
        )
        return make_content_retry_sensor()(context)


@pytest.fixture
def setup(fresh_db, tmp_path, monkeypatch) -> Iterator[Setup]:
    monkeypatch.setenv("MDAME_HOME", str(tmp_path))
    for name in (RETRY_BACKOFF_ENV, RETRY_WINDOW_DAYS_ENV):
        monkeypatch.delenv(name, raising=False)
    state = StateStore(fresh_db.app, env="dev")
    active = sync_registry(as_admin(state), DIMENSIONS_DIR).active
    with runkit.quick_instance(tmp_path / "events") as instance:
        instance.add_dynamic_partitions(DIMENSION_PARTITION, list(active))
        yield Setup(
            state,
            instance,
            StateStoreResource(database_url=fresh_db.app),
            datetime.now(UTC).date(),
        )
    close_clients()
    state.close()


def publish_a_script(state: StateStore, dimension: str, day: date) -> None:
    """A script of the partition walked through every stage to 'published'."""
    dim = state.get_dimension(dimension)
    assert dim is not None
    base = {"dimension_id": dim.id, "partition_date": day.isoformat()}
    with held_lock(state, dimension, f"seed:{os.getpid()}") as held:
        topic = held.upsert_work_unit("topic", f"topic:{dimension}", {**base, "title": "t"})
        script = held.upsert_work_unit("script", f"script:{dimension}", {**base, "topic_id": topic})
        path = script_states(held, "drafted", "published")
        for src, dst in zip(path, path[1:], strict=False):
            held.transition("script", script, src, dst)


def test_a_failed_content_partition_of_today_is_requested_again_and_a_published_one_is_not(
    setup, monkeypatch
):
    tech, science, cooking = setup.key("tech"), setup.key("science"), setup.key("cooking")
    [failed] = runkit.fail_runs(setup.instance, 1, CONTENT_JOB, tech)
    runkit.fail_runs(setup.instance, 1, CONTENT_JOB, science)
    publish_a_script(setup.state, "science", setup.today)
    runkit.add_run(setup.instance, dg.DagsterRunStatus.SUCCESS, CONTENT_JOB, cooking)

    waiting = setup.evaluate()  # the default backoff (about 2 minutes) has not passed yet
    assert waiting.run_requests == []
    assert f"{tech}: retry 1 due at" in waiting.skip_reason.skip_message
    assert f"{science}: published" in waiting.skip_reason.skip_message
    assert cooking not in waiting.skip_reason.skip_message  # its newest run succeeded

    monkeypatch.setenv(RETRY_BACKOFF_ENV, "0.001")
    first, again = setup.evaluate(), setup.evaluate()
    [request] = first.run_requests
    assert request.partition_key == tech
    assert request.tags["mdame/partition"] == tech.replace("|", "_")
    assert request.run_key == f"content:{tech}:retry1:{failed.dagster_run.run_id}"
    assert [r.run_key for r in again.run_requests] == [request.run_key]

    # The retried run fails too: the next retry has a new key, after a longer backoff.
    [failed_again] = runkit.fail_runs(setup.instance, 1, CONTENT_JOB, tech)
    [retry2] = setup.evaluate().run_requests
    assert retry2.run_key == f"content:{tech}:retry2:{failed_again.dagster_run.run_id}"

    # A run of the partition queued or in progress: nothing is requested.
    runkit.add_run(setup.instance, dg.DagsterRunStatus.STARTED, CONTENT_JOB, tech)
    busy = setup.evaluate()
    assert busy.run_requests == []
    assert f"{tech}: a run is queued or in progress" in busy.skip_reason.skip_message


def test_yesterdays_failed_partition_is_retried_only_inside_the_window(setup, monkeypatch):
    yesterday, older = setup.key("tech", days_ago=1), setup.key("tech", days_ago=2)
    runkit.fail_runs(setup.instance, 3, CONTENT_JOB, yesterday)
    runkit.fail_runs(setup.instance, 1, CONTENT_JOB, older)
    monkeypatch.setenv(RETRY_BACKOFF_ENV, "0.001")

    [request] = setup.evaluate().run_requests  # the default window: today and yesterday
    assert request.partition_key == yesterday and ":retry3:" in request.run_key

    monkeypatch.setenv(RETRY_WINDOW_DAYS_ENV, "0")  # today only
    today_only = setup.evaluate()
    assert today_only.run_requests == []
    assert "no failed content run in the retry window" in today_only.skip_reason.skip_message


@pytest.fixture
def live_instance():
    # Loading definitions reads Dagster's current defs-state storage, a process global that
    # points at the last instance created: keep one alive.
    with dg.instance_for_test() as instance:
        yield instance


def test_the_orchestrator_runs_the_content_retry_sensor(live_instance):
    sensor = orchestrator.defs().resolve_sensor_def("content_retry_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.job_name == CONTENT_JOB
