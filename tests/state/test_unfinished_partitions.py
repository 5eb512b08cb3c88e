"""mdame.unfinished_partitions: the partitions of a day a run would still find work in. A
partition is finished once its last run, a publishing_job, succeeded with all of its work in
terminal states, nothing left for the next run's recovery pass and no change to its niche since;
each of those broken alone makes it unfinished again."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

import psycopg
import pytest

from mdame_core.state import StateStore
from tests.adminkit import as_admin
from tests.state.test_fencing import hold

DAY = date(2026, 11, 29)
KEY = "2026-11-29|tech"


@dataclass
class Partition:
    """tech's partition of DAY, finished: written through the RPCs a run makes."""

    state: StateStore
    owner: psycopg.Connection
    work: StateStore  # fenced by tech's pipeline lock
    dimension_id: int
    account_id: int
    topic: int
    script: int
    render: int
    publication: int

    def run(self, job: str, status: str = "succeeded") -> None:
        execution = uuid.uuid4()
        self.state.start_pipeline_run(execution, "tech", KEY, self.work.fence.secret)
        self.state.finish_pipeline_run(execution, status, {"job": job})

    def unit(self, kind: str, key: str, **payload: object) -> int:
        base = {"dimension_id": self.dimension_id, "partition_date": DAY.isoformat()}
        return self.work.upsert_work_unit(kind, key, {**base, **payload})

    def walk(self, kind: str, unit_id: int, *states: str) -> None:
        current = self.state.get_work_unit(kind, unit_id)
        assert current is not None
        for to in states:
            self.work.transition(kind, unit_id, current.state, to)
            current = self.state.get_work_unit(kind, unit_id)
            assert current is not None and current.state == to


@pytest.fixture
def partition(state: StateStore, owner: psycopg.Connection) -> Partition:
    admin = as_admin(state)
    dimension_id = admin.upsert_dimension("tech", "Tech", {"daily_budget_micros": 1_000})
    admin.upsert_dimension("news", "News")
    account_id = admin.upsert_dimension_account("tech", "youtube", "tech-minute", 10_000)
    admin.upsert_dimension_account("tech", "youtube", "tech-two", 10_000)  # nothing for it yet
    work = hold(state, "tech")
    p = Partition(state, owner, work, dimension_id, account_id, 0, 0, 0, 0)
    p.topic = p.unit("topic", "topic-1")
    p.walk("topic", p.topic, "approved", "scripted")
    p.script = p.unit("script", "script-1", topic_id=p.topic)
    p.render = work.upsert_work_unit("render", "render-1", {"script_id": p.script})
    p.publication = work.upsert_work_unit(
        "publication",
        "publication-1",
        {"script_id": p.script, "render_id": p.render, "account_id": account_id},
    )
    p.walk("publication", p.publication, "uploading", "published")
    # The stages' own path, from the database: drafted (where it starts) .. published.
    p.walk("script", p.script, *state.work_flow("script", "published")[1:])
    p.run("content_job")
    p.run("scene_clips_job")
    p.run("publishing_job")
    return p


def test_a_partition_whose_publishing_run_succeeded_with_its_work_done_is_finished(
    partition: Partition,
) -> None:
    state = partition.state
    assert state.unfinished_partitions(DAY, ["tech"]) == []
    # An unknown slug is unfinished (its run says why); the order given is kept.
    assert state.unfinished_partitions(DAY, ["nope", "tech", "news"]) == ["nope", "news"]
    assert state.unfinished_partitions(DAY, []) == []
    # Another day of the same dimension has not run at all.
    assert state.unfinished_partitions(date(2026, 11, 30), ["tech"]) == ["tech"]


def _non_terminal_script(p: Partition) -> None:
    topic = p.unit("topic", "topic-2")
    p.walk("topic", topic, "approved", "scripted")
    script = p.unit("script", "script-2", topic_id=topic)
    p.walk("script", script, "approved", "planned", "visuals_ready", "voice_queued", "halted")


def _non_terminal_topic(p: Partition) -> None:
    p.unit("topic", "topic-2")  # a candidate


def _pending_publication(p: Partition) -> None:
    account = as_admin(p.state).upsert_dimension_account("tech", "youtube", "tech-two", 10_000)
    assert account != p.account_id
    p.work.upsert_work_unit(
        "publication",
        "publication-2",
        {"script_id": p.script, "render_id": p.render, "account_id": account},
    )


def _stalled_script_of_another_day(p: Partition) -> None:
    # The next run's recovery pass looks at every day's stalled scripts of the dimension.
    base = {"dimension_id": p.dimension_id, "partition_date": "2026-11-28"}
    topic = p.work.upsert_work_unit("topic", "topic-old", base)
    p.walk("topic", topic, "approved", "scripted")
    script = p.work.upsert_work_unit("script", "script-old", {**base, "topic_id": topic})
    p.walk("script", script, "approved", "planned", "visuals_ready", "voice_queued")


def _unsettled_paid_call(p: Partition) -> None:
    start = p.work.begin_paid_call("tech", "voice:tts", "gemini:tts", "h", 40, None, 3, 0)
    assert start.action == "submit"


def _unknown_upload(p: Partition) -> None:
    as_admin(p.work).record_attempt("publication-1", "outbox", "h", "unknown")


def _queued_job(p: Partition) -> None:
    as_admin(p.state).enqueue_job("scene_clip", "job-1", {"n": 1}, partition_key=KEY)


def _expired_lease(p: Partition) -> None:
    # Any partition's: the recovery pass returns every expired lease.
    as_admin(p.state).enqueue_job("scene_clip", "job-x", {"n": 1}, partition_key="x")
    assert p.state.claim_job("scene_clip", "w", 600) is not None
    p.owner.execute(  # its worker died: the lease ran out
        "UPDATE mdame.jobs SET lease_expires_at = now() - interval '1 second'"
    )


def _niche_changed(p: Partition) -> None:
    # A niche file changed since (more videos a day, say): a run may make more.
    as_admin(p.state).upsert_dimension("tech", "Tech", {"daily_budget_micros": 1_000, "n": 2})


def _new_account(p: Partition) -> None:
    as_admin(p.state).upsert_dimension_account("tech", "youtube", "tech-three", 10_000)


def _no_publishing_run(p: Partition) -> None:
    p.run("content_job")  # the latest run is the content job's


def _failed_run_after_it(p: Partition) -> None:
    p.run("publishing_job", status="failed")


def _running(p: Partition) -> None:
    p.state.start_pipeline_run(uuid.uuid4(), "tech", KEY, p.work.fence.secret)


BROKEN: dict[str, Callable[[Partition], None]] = {
    "non-terminal script": _non_terminal_script,
    "non-terminal topic": _non_terminal_topic,
    "pending publication": _pending_publication,
    "stalled script of another day": _stalled_script_of_another_day,
    "unsettled paid call": _unsettled_paid_call,
    "upload of unknown outcome": _unknown_upload,
    "queued job": _queued_job,
    "expired job lease": _expired_lease,
    "niche file changed": _niche_changed,
    "new account": _new_account,
    "a later content_job run": _no_publishing_run,
    "a later failed run": _failed_run_after_it,
    "a run in progress": _running,
}


@pytest.mark.parametrize("broken", list(BROKEN))
def test_each_condition_broken_alone_makes_the_partition_unfinished(
    partition: Partition, broken: str
) -> None:
    BROKEN[broken](partition)
    assert partition.state.unfinished_partitions(DAY, ["news", "tech"]) == ["news", "tech"]


def test_only_a_succeeded_publishing_run_finishes_a_partition(state: StateStore) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    work = hold(state, "tech")

    def run(job: str, status: str) -> None:
        execution = uuid.uuid4()
        state.start_pipeline_run(execution, "tech", KEY, work.fence.secret)
        state.finish_pipeline_run(execution, status, {"job": job})

    assert state.unfinished_partitions(DAY, ["tech"]) == ["tech"]  # no run at all
    run("content_job", "succeeded")
    assert state.unfinished_partitions(DAY, ["tech"]) == ["tech"]
    run("publishing_job", "failed")
    assert state.unfinished_partitions(DAY, ["tech"]) == ["tech"]
    run("publishing_job", "succeeded")
    assert state.unfinished_partitions(DAY, ["tech"]) == []


def test_another_days_script_waiting_for_its_own_stage_leaves_the_partition_finished(
    partition: Partition,
) -> None:
    # Planned on the 28th: its clips come from the 28th's scene_clips run, never from the 29th's
    # runs, whose recovery pass acts only on stalled voice, render and publishing scripts.
    base = {"dimension_id": partition.dimension_id, "partition_date": "2026-11-28"}
    topic = partition.work.upsert_work_unit("topic", "topic-old", base)
    partition.walk("topic", topic, "approved", "scripted")
    script = partition.work.upsert_work_unit("script", "script-old", {**base, "topic_id": topic})
    partition.walk("script", script, "approved", "planned")
    assert partition.state.unfinished_partitions(DAY, ["tech"]) == []
    assert partition.state.unfinished_partitions(date(2026, 11, 28), ["tech"]) == ["tech"]


def test_a_sync_that_changes_nothing_leaves_the_partition_finished(partition: Partition) -> None:
    admin = as_admin(partition.state)
    admin.upsert_dimension("tech", "Tech", {"daily_budget_micros": 1_000})
    admin.upsert_dimension_account("tech", "youtube", "tech-minute", 10_000)
    admin.set_dimension_accounts_active(
        "tech", [("youtube", "tech-minute"), ("youtube", "tech-two")]
    )
    assert partition.state.unfinished_partitions(DAY, ["tech"]) == []


def test_a_settled_paid_call_leaves_the_partition_finished_again(partition: Partition) -> None:
    start = partition.work.begin_paid_call("tech", "voice:tts", "gemini:tts", "h", 40, None, 3, 0)
    assert partition.state.unfinished_partitions(DAY, ["tech"]) == ["tech"]
    assert start.attempt_id is not None
    partition.work.settle_paid_call(start.attempt_id, "succeeded", 30)
    assert partition.state.unfinished_partitions(DAY, ["tech"]) == []
