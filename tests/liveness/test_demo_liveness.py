"""`mdame demo` against one database and one persistent Dagster instance, in real processes:

- waiting for the gpu pool slot (held by another, live run) it still stops on SIGTERM and on
  Ctrl-C (SIGINT to its process group), marks its run failed and leaves no pending claim;
- SIGKILLed (its whole process group) at random moments, one of them while scene_clips holds
  the gpu slot, then run again: it completes in bounded time, and leaves no unfinished run, no
  slot held by a dead run, no leased job, no running run record and no duplicate publication.

`make chaos-sequence` runs the issue's full version (five kills of every dimension's demo).
"""

from __future__ import annotations

import random
import signal
import time
import uuid

import dagster as dg
import pytest
from liveness_kit import Demo, World, kill_sequence, leftovers, rows, slot_holders, wait_for

from mdame_runtime.liveness import process_tags

DIMENSION = "science"
# Generous for two busy cores: one partition's render dominates (about 100 s when busy).
COMPLETION_BOUND_S = 420


def pending_runs(world: World) -> list[str]:
    try:
        return [r[0] for r in rows(world.dagster_url, "SELECT run_id FROM pending_steps")]
    except Exception:  # noqa: BLE001 - the table appears with the first claim
        return []


@pytest.mark.slow
@pytest.mark.parametrize(
    ("signum", "to_group"), [(signal.SIGTERM, False), (signal.SIGINT, True)], ids=["term", "int"]
)
def test_demo_waiting_on_the_gpu_slot_stops_on_a_signal(world: World, tmp_path, signum, to_group):
    # Another run, owned by this (live) test process, holds the gpu pool's only slot.
    with world.instance() as instance:
        blocker = str(uuid.uuid4())
        instance.add_run(
            dg.DagsterRun(
                job_name="scene_clips_job",
                run_id=blocker,
                status=dg.DagsterRunStatus.STARTED,
                tags=process_tags(),
            )
        )
        instance.event_log_storage.initialize_concurrency_limit_to_default("gpu")
        assert instance.event_log_storage.claim_concurrency_slot(
            "gpu", blocker, "scene_clips"
        ).is_claimed

    demo = Demo.start(world, tmp_path / "demo.log", [DIMENSION])
    waiting = wait_for(
        "the demo's scene_clips step to wait for the gpu slot",
        lambda: [r for r in pending_runs(world) if r != blocker],
        timeout=240,
    )
    time.sleep(1.0)  # well inside the wait loop (it polls the slot about once a second)
    sent = time.monotonic()
    if to_group:
        demo.killpg(signum)
    else:
        demo.proc.send_signal(signum)
    code = demo.wait(timeout=30)
    stopped_in = time.monotonic() - sent

    assert code == 128 + signum, demo.tail()
    assert stopped_in < 15, f"took {stopped_in:.1f}s to stop"
    assert f"stopped by {signal.Signals(signum).name}" in demo.tail()
    with world.instance() as instance:
        [run] = [instance.get_run_by_id(r) for r in set(waiting)]
        assert run.status == dg.DagsterRunStatus.FAILURE
    assert set(pending_runs(world)) == {blocker}  # the stopped run's pending claim is gone
    assert slot_holders(world) == [blocker]  # the live holder keeps its slot


@pytest.mark.slow
def test_sigkilled_demos_then_one_more_completes_with_nothing_left_behind(world: World, tmp_path):
    rng = random.Random(7)
    (tmp_path / "a").mkdir(), (tmp_path / "b").mkdir()
    kill_sequence(
        world, tmp_path / "a", [DIMENSION], kills=1, rng=rng, runs_per_demo=3, max_delay_s=5.0
    )
    # The headline case: the killed run stays STARTED and keeps the gpu pool's only slot.
    dead_state = leftovers(world)
    assert dead_state.unfinished_runs and dead_state.slot_holders, dead_state
    # A second demo recovers that, and is killed at a random moment of its own work.
    kill_sequence(
        world,
        tmp_path / "b",
        [DIMENSION],
        kills=1,
        rng=rng,
        runs_per_demo=3,
        max_delay_s=5.0,
        first_at_gpu_slot=False,
    )
    swept = (tmp_path / "b" / "demo-0.log").read_text()
    assert "liveness sweep: 1 dead runs marked failed, slots freed for 1 runs" in swept

    demo = Demo.start(world, tmp_path / "demo-final.log", [DIMENSION])
    code = demo.wait(timeout=COMPLETION_BOUND_S)
    assert code == 0, demo.tail()

    left = leftovers(world)
    assert left.clean, left
    assert left.published >= 1
