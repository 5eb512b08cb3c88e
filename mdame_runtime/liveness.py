"""Liveness after crashes: runs whose process died are marked failed and their pool slots freed.

A SIGKILLed run never writes its own end: Dagster keeps it STARTED and its claim on a pool slot
(the `gpu` pool has one) stays held, so every later scene_clips step waits behind a dead run
forever. Run monitoring in the daemon cannot see this for the DefaultRunLauncher (it does not
support `check_run_worker_health`, so only STARTING timeouts are enforced), and `mdame demo`
runs with no daemon at all. So this module decides liveness itself, from the process that owns
a run:

- in-process runs (`mdame demo`, `execute_in_process`) carry tags naming their process: host,
  pid and the process's start time (boot id + start ticks), so a reused pid is not mistaken
  for the live owner;
- daemon-launched runs have no such tags; their run worker reported its pid in the
  "Started process for run (pid: N)" engine event, and a process with that pid only counts as
  the owner if it started before the run did.

`sweep` marks every dead run failed (a run failure event with the reason), frees its
concurrency slots and pending steps, frees slots still held by runs that already ended, and
finishes the matching `mdame.pipeline_runs` rows. `mdame demo` calls it before it starts work;
in production each code location's liveness sensor (mdame_assets.liveness_sensor) calls it every
minute.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from mdame_core.state import StateError, StateStore
from mdame_runtime.run_outcomes import record_run_outcome

HOST_TAG, PID_TAG, STARTED_TAG = "mdame/host", "mdame/pid", "mdame/pid_started"
# A run worker starts before its run's RUN_START event; a pid whose process started later than
# that (plus this slack for clock granularity) belongs to someone else.
START_SLACK_S = 2.0
# Statuses in which a run claims to be owned by a live process.
LIVE_STATUSES = [
    dg.DagsterRunStatus.STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.CANCELING,
]
# In-process runs are created NOT_STARTED and started by the same process: a dead owner means
# they can never start. (Daemon-queued runs are the daemon's to start; they are left alone.)
NEVER_STARTING = [dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED]
FINISHED = [dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED]


def _boot_id() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def stat_fields(pid: int | str) -> list[str] | None:
    """The fields of /proc/PID/stat after the command name (state, ppid, ..., utime at 11,
    starttime at 19), None if the process is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (OSError, ValueError):
        return None
    # The command name may hold spaces and parentheses: fields start after the last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def _stat(pid: int) -> tuple[str, int] | None:
    """(state letter, start time in clock ticks since boot) of a process, None if gone."""
    fields = stat_fields(pid)
    return (fields[0], int(fields[19])) if fields else None


def _pid_gone(pid: int) -> bool:
    stat = _stat(pid)
    return stat is None or stat[0] in ("Z", "X")  # gone, or a zombie nobody reaped yet


def _boot_time() -> float:
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    raise RuntimeError("no btime in /proc/stat")


def process_tags(pid: int | None = None) -> dict[str, str]:
    """Tags naming a process (this one by default) for an in-process run."""
    pid = pid or os.getpid()
    stat = _stat(pid)
    started = f"{_boot_id()}:{stat[1]}" if stat else ""
    return {HOST_TAG: socket.gethostname(), PID_TAG: str(pid), STARTED_TAG: started}


def process_alive(tags: Mapping[str, str]) -> bool | None:
    """Whether the process named by `process_tags` still runs; None when it is on another host
    (that host's own sweep decides)."""
    if tags.get(HOST_TAG) != socket.gethostname():
        return None
    pid = int(tags[PID_TAG])
    stat = _stat(pid)
    if stat is None or _pid_gone(pid):
        return False
    expected = tags.get(STARTED_TAG, "")
    return not expected or expected == f"{_boot_id()}:{stat[1]}"


def worker_pid(instance: dg.DagsterInstance, run_id: str) -> tuple[int, float] | None:
    """The pid a daemon-launched run worker reported ("Started process for run (pid: N)"), and
    when it reported it."""
    records = instance.get_records_for_run(
        run_id, of_type=dg.DagsterEventType.ENGINE_EVENT, limit=20
    ).records
    for record in records:
        event = record.event_log_entry.dagster_event
        data = event.engine_event_data if event else None
        pid = data.metadata.get("pid") if data else None
        if pid is not None and "Started process for run" in (record.event_log_entry.message or ""):
            return int(str(pid.value)), record.event_log_entry.timestamp
    return None


def _worker_alive(pid: int, run_started: float) -> bool:
    stat = _stat(pid)
    if stat is None or stat[0] in ("Z", "X"):
        return False
    ticks = os.sysconf("SC_CLK_TCK")
    return _boot_time() + stat[1] / ticks <= run_started + START_SLACK_S


def run_location(run: dg.DagsterRun) -> str | None:
    """The code location whose code server launched the run; None for in-process runs."""
    origin = run.remote_job_origin
    return origin.location_name if origin is not None else None


def run_is_dead(
    instance: dg.DagsterInstance,
    record: dg.RunRecord,
    *,
    local_workers: bool,
    location: str | None = None,
) -> bool:
    """Whether the run's owning process is certainly gone. Unknown owners count as alive.

    `local_workers`: daemon-launched runs' workers run on this host (DefaultRunLauncher with the
    code servers here), so their reported pid can be checked here. `location`: only the runs
    this code location launched are (another location's code server, whose subprocesses its
    run workers are, may be on another host); None: every location's.
    """
    run = record.dagster_run
    if PID_TAG in run.tags:
        return process_alive(run.tags) is False
    if not local_workers or run.status not in LIVE_STATUSES:
        return False
    if location is not None and run_location(run) != location:
        return False  # that location's own liveness sensor judges it, on its host
    reported = worker_pid(instance, run.run_id)
    if reported is None:
        # Not started yet (STARTING): the daemon's start_timeout_seconds covers it.
        return False
    pid, reported_at = reported
    # A STARTING run (no RUN_START yet) was created, and maybe queued, long before its worker
    # started: the launcher's report of the worker bounds its start, not the run's creation
    # (a queued run's live worker was taken for a stranger and its run marked failed).
    if record.start_time is not None:
        started = record.start_time
    elif run.status == dg.DagsterRunStatus.STARTING:
        started = reported_at
    else:
        started = record.create_timestamp.timestamp()
    return not _worker_alive(pid, started)


@dataclass
class SweepReport:
    failed_runs: list[str] = field(default_factory=list)
    freed_slot_runs: list[str] = field(default_factory=list)
    finished_rows: list[str] = field(default_factory=list)
    released_locks: list[str] = field(default_factory=list)
    requeued_jobs: list[int] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(
            self.failed_runs
            or self.freed_slot_runs
            or self.finished_rows
            or self.released_locks
            or self.requeued_jobs
        )

    def summary(self) -> str:
        return (
            f"{len(self.failed_runs)} dead runs marked failed, slots freed for "
            f"{len(self.freed_slot_runs)} runs, {len(self.finished_rows)} run records finished, "
            f"{len(self.released_locks)} locks of dead runs released, "
            f"{len(self.requeued_jobs)} jobs of dead workers requeued"
        )


def _free_slots(instance: dg.DagsterInstance, run_id: str) -> bool:
    storage = instance.event_log_storage
    if not storage.supports_global_concurrency_limits:
        return False
    if run_id not in storage.get_concurrency_run_ids():
        return False
    storage.free_concurrency_slots_for_run(run_id)
    return True


def sweep(
    instance: dg.DagsterInstance,
    state: StateStore | None = None,
    *,
    operator: StateStore | None = None,
    local_workers: bool = True,
    location: str | None = None,
) -> SweepReport:
    """Fail every run whose process died, free the pool slots of every run that is not live,
    and finish their `mdame.pipeline_runs` rows. Safe to run at any time, from any process.
    With `operator` (an admin client) the pipeline locks of ended runs are released and dead
    workers' jobs requeued too; the app role cannot (a lock or a job lease is given up only
    with its holder's secret), so without it they expire on their TTL and lease.
    `local_workers` and `location`: which daemon-launched runs' workers are this host's
    (run_is_dead)."""
    report = SweepReport()
    records = instance.get_run_records(
        filters=dg.RunsFilter(statuses=[*LIVE_STATUSES, *NEVER_STARTING])
    )
    for record in records:
        run = record.dagster_run
        if run.status in NEVER_STARTING and PID_TAG not in run.tags:
            continue
        if not run_is_dead(instance, record, local_workers=local_workers, location=location):
            continue
        owner = run.tags.get(PID_TAG) or "its run worker"
        instance.report_run_failed(
            run,
            f"mdame liveness sweep: the process that owned this run ({owner} on "
            f"{run.tags.get(HOST_TAG, 'this host')}) is gone; marking the run failed and "
            "freeing its concurrency slots so later runs are not blocked behind it.",
        )
        report.failed_runs.append(run.run_id)
    # Slots held by runs that are no longer live (just failed above, or ended without freeing):
    # the daemon frees these only with free_slots_after_run_end_seconds, the demo never.
    storage = instance.event_log_storage
    if storage.supports_global_concurrency_limits:
        holders = storage.get_concurrency_run_ids()
        if holders:
            statuses = {
                r.dagster_run.run_id: r.dagster_run.status
                for r in instance.get_run_records(filters=dg.RunsFilter(run_ids=list(holders)))
            }
            # Ended runs, and slot holders whose run record is gone altogether (deleted runs).
            stale = [run_id for run_id in holders if statuses.get(run_id, FINISHED[1]) in FINISHED]
            for run_id in sorted(stale):
                if _free_slots(instance, run_id):
                    report.freed_slot_runs.append(run_id)
    if state is not None:
        report.finished_rows = finish_stale_rows(instance, state)
        if operator is not None:
            report.released_locks = release_dead_holders_locks(instance, state, operator)
            report.requeued_jobs = requeue_dead_workers_jobs(state, operator)
    return report


def requeue_dead_workers_jobs(state: StateStore, operator: StateStore) -> list[int]:
    """Jobs leased by a worker process of this host that is gone (a worker id is
    `<host>:<pid>` or `<host>:<name>:<pid>`) go back to the queue now, by the operator (admin
    role), instead of after their lease (300 s by default): a killed demo's scene steps
    otherwise make the next run wait out the lease. A pid that is alive again (reused) is left
    to its lease: only a certain death frees a job early."""
    host = socket.gethostname()
    rows = state._select(  # a read; the app role may SELECT
        """SELECT id, lease_owner, attempt FROM mdame.jobs
            WHERE state = 'running' AND starts_with(lease_owner, %s)""",
        [host + ":"],
    )
    requeued = []
    for job_id, owner, attempt in rows:
        pid = owner.rsplit(":", 1)[1]
        if not pid.isdigit() or not _pid_gone(int(pid)):
            continue
        with contextlib.suppress(StateError):  # refused: left to its lease
            error = "liveness sweep: the worker process is gone"
            if operator.requeue_dead_job(job_id, owner, attempt, error) is not None:
                requeued.append(job_id)
    return requeued


def release_dead_holders_locks(
    instance: dg.DagsterInstance, state: StateStore, operator: StateStore
) -> list[str]:
    """Pipeline locks still held by a run that has ended (a dead run, now marked failed):
    released by the operator (admin role), so the next run takes over now rather than after the
    lock's TTL. A holder is `<run id>:<stage>`; locks of runs this instance does not know are
    left to expire."""
    rows = state._select(  # a read; the app role may SELECT
        """SELECT lock_name, holder, token FROM mdame.system_locks
            WHERE released_at IS NULL AND expires_at > now()"""
    )
    by_run: dict[str, list[tuple[str, str, int]]] = {}
    for name, holder, token in rows:
        by_run.setdefault(holder.split(":", 1)[0], []).append((name, holder, token))
    if not by_run:
        return []
    ended = {
        r.dagster_run.run_id
        for r in instance.get_run_records(
            filters=dg.RunsFilter(run_ids=list(by_run), statuses=FINISHED)
        )
    }
    released = []
    for run_id in sorted(ended):
        for name, holder, token in by_run[run_id]:
            try:
                if operator.release_dead_pipeline_lock(name, holder, token):
                    released.append(name)
            except StateError:  # refused: left to expire
                pass
    return released


def finish_stale_rows(instance: dg.DagsterInstance, state: StateStore) -> list[str]:
    """`pipeline_runs` rows still 'running' whose Dagster run (in this instance) has ended get
    the run's outcome. Rows of runs this instance does not know are left alone: another
    instance (a test's, another deployment's) may own them."""
    rows = state._select(  # a read; the app role may SELECT
        "SELECT execution_id::text FROM mdame.pipeline_runs WHERE status = 'running'"
    )
    running = [r[0] for r in rows]
    finished = []
    for start in range(0, len(running), 500):
        batch = running[start : start + 500]
        for record in instance.get_run_records(
            filters=dg.RunsFilter(run_ids=batch, statuses=FINISHED)
        ):
            run = record.dagster_run
            if record_run_outcome(
                state, run.run_id, run.status, "liveness sweep", job=run.job_name
            ):
                finished.append(run.run_id)
    return finished
