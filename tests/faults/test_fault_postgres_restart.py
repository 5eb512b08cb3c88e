"""PostgreSQL stopped with `pg_ctl stop -m immediate` mid-run, restarted, then a rerun.

On a cluster of the test's own. The run is in its GPU stage, and its next RPC (finish_visuals,
the script's move to visuals_ready) is in flight, held on the script's row lock so the timing is
exact, when the server dies without a checkpoint. The step fails with a lost connection, which
the job's RetryPolicy retries once the server is back (so the run may still finish); if the run
failed, the database shows the in-flight move never happened. The rerun, as the next cron tick,
converges: one publication, one outbox file, balanced ledgers, no job on a dead lease, no lock
left held.
(A run whose server dies between two calls rides out the restart: the pool reconnects.)
"""

from __future__ import annotations

import contextlib
import time

import psycopg
from faultkit import PartitionRun, child_env, rows, wait_for

from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from tests.adminkit import as_admin
from tests.chaos.invariants import violations

SHORT = {"MDAME_LOCK_TTL_S": "3", "MDAME_JOB_LEASE_S": "3"}  # a dead run's hold ends fast


def test_server_killed_mid_run_then_restarted_and_rerun_converges(
    throwaway_cluster, warm_home, tmp_path
):
    cluster, home = throwaway_cluster, warm_home
    with StateStore(cluster.app, env="dev") as state:
        sync_registry(as_admin(state), DIMENSIONS_DIR)
    env = child_env(cluster.owner, cluster.app, home, **SHORT)
    mdame_su = cluster.superuser.rsplit("/", 1)[0] + "/mdame"

    run = PartitionRun.start(env, tmp_path / "killed.log")
    wait_for(
        "a scene job to be running",
        lambda: rows(cluster.app, "SELECT 1 FROM mdame.jobs WHERE state = 'running'"),
        timeout=120,
    )
    holder = psycopg.connect(cluster.owner)
    [(locked_in,)] = holder.execute("SELECT state FROM mdame.scripts FOR UPDATE").fetchall()
    wait_for(
        f"the run's move of the script out of {locked_in} to be in flight",
        lambda: rows(
            mdame_su,
            """SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock'
                AND query LIKE '%%mdame.finish_visuals(%%'""",
        ),
        timeout=120,
    )
    cluster.ctl("kill")  # pg_ctl stop -m immediate: no checkpoint, every connection cut
    with contextlib.suppress(psycopg.Error):
        holder.close()
    time.sleep(1.0)
    cluster.ctl("start")
    first = run.wait(timeout=300)

    # The lost connection is transient: the job's RetryPolicy may retry the step once the
    # server is back, and the run then finishes by itself. If it failed instead, what happened
    # is what the database says after the restart: the move never committed.
    if not first["ok"]:
        assert rows(cluster.app, "SELECT state FROM mdame.scripts") == [(locked_in,)]

    rerun = PartitionRun.start(env, tmp_path / "rerun.log").wait(timeout=300)

    assert rerun["ok"], f"{rerun['error']} (first run: {first['error']})"
    assert violations(cluster.app, home, home / "media") == []
    assert rows(cluster.app, "SELECT state FROM mdame.scripts") == [("published",)]
    assert rows(cluster.app, "SELECT count(*) FROM mdame.publications") == [(1,)]
    assert len(list((home / "outbox").glob("science/*/video.mp4"))) == 1
