"""The crash harness: kill the pipeline at every commit boundary, rerun it, check it converged.

1. A clean run of one partition, from a fresh database and home, records the sequence of RPC
   commits (MDAME_RPC_TRACE). Each (rpc, n) in it is a crash point, except the heartbeats
   (of the lock, of a job's lease): timer threads send those, so their number varies from run
   to run (a crash during a heartbeat is a crash mid-step, which neighbouring points cover).
2. For every crash point, before and after its commit: a fresh database and home, a run with
   MDAME_CRASH_AT (it must die by SIGKILL), then reruns without it, as the next cron ticks
   would, until one finishes (at most `max_reruns`).
3. After each case the invariants (invariants.py) must hold and the end state must equal the
   clean run's.

The publisher mode (`publisher="youtube"`, `"tiktok"` or `"instagram"`) publishes through
that platform's production publisher to a fake of it (channel.py) that each case runs in a
process of its own, so a kill of the pipeline leaves it running (in the TikTok and Instagram
modes the dimension's account is an account of that platform with the same handle); the chunk
requests of the byte transfer are crash points too (`send_chunk`, child.py), and the channel's
videos, bytes and counters are checked.

Runs are child processes forked from a warm fork server (multiprocessing's forkserver, see
child.py), so, as with any multiprocessing program, a script that uses the Harness keeps its
top-level code under `if __name__ == "__main__":`. `jobs` cases run at once. Lock TTL and job
lease are a few seconds, so a rerun takes over from the killed run quickly; a shared media root
lets reruns reuse renders, clips and render analyses.
"""

from __future__ import annotations

import json
import multiprocessing
import shutil
import signal
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

from mdame_core.state import StateStore
from mdame_domain.media_profile import SHORTS, media_profile
from tests import scratch_db
from tests.adminkit import as_admin, close_admins
from tests.chaos.channel import (
    ChannelProcess,
    Grants,
    InstagramProcess,
    TikTokProcess,
    platform_niche,
    seal_grants,
)
from tests.chaos.child import CHUNK_ENV, MEMO_ENV, PUBLISHER_ENV
from tests.chaos.crashpoint import CRASH_ENV, TRACE_ENV, CrashPoint
from tests.chaos.invariants import EndState, snapshot, violations

DEFAULT_DAY = date(2026, 11, 29)
DEFAULT_DIMENSION = "science"
# Heartbeats (of the pipeline lock, of a job's lease) are sent by timer threads: how many a run
# sends varies, so they are not deterministic crash points.
TIMER_RPC_PREFIX = "heartbeat_"
PHASES = ("before", "after")
PUBLISHERS = ("outbox", "youtube", "tiktok", "instagram")
# The fake each platform's mode runs per case (YouTube's: ChannelProcess), and whose account the
# dimension's account becomes.
SERVERS: dict[str, type[ChannelProcess]] = {"tiktok": TikTokProcess, "instagram": InstagramProcess}


def default_chunk_bytes() -> int:
    """The YouTube upload's chunk, so that a render spans several: 1 MiB for the product's
    renders (megabytes), YouTube's 256 KiB unit for the tiny profile's (hundreds of KiB)."""
    return 1024 * 1024 if media_profile() == SHORTS else 256 * 1024


@dataclass(frozen=True)
class ChaosConfig:
    day: date = DEFAULT_DAY
    dimension: str = DEFAULT_DIMENSION
    jobs: int = 2  # cases at once
    lock_ttl_s: int = 2  # a killed run's lock and job leases expire this fast
    job_lease_s: int = 2
    max_reruns: int = 3
    run_timeout_s: float = 600.0
    memo: bool = True  # reuse clips and render analyses across cases (child.py)
    media_root: Path | None = None  # None: a fresh temporary store for this harness run
    keep_failed: bool = False  # keep a failed case's database and home for inspection
    # "youtube" or "tiktok": that platform's publisher and a fake of it per case
    publisher: str = "outbox"
    chunk_bytes: int = field(default_factory=default_chunk_bytes)

    @property
    def partition_key(self) -> str:
        return f"{self.day.isoformat()}|{self.dimension}"


@dataclass(frozen=True)
class RunResult:
    exitcode: int | None  # None: killed by the harness after run_timeout_s
    seconds: float
    log: Path
    commits: int  # RPC commits this run recorded

    @property
    def killed(self) -> bool:
        return self.exitcode == -signal.SIGKILL

    def error(self) -> str:
        """The outcome's error line, or the log's last line."""
        if self.exitcode is None:
            return "timed out"
        lines = self.log.read_text(errors="replace").splitlines() if self.log.exists() else []
        for line in reversed(lines):
            if line.startswith("{"):
                try:
                    return json.loads(line).get("error") or f"exit {self.exitcode}"
                except ValueError:
                    break
        return (lines[-1] if lines else "") or f"exit {self.exitcode}"


@dataclass(frozen=True)
class CleanRun:
    commits: tuple[str, ...]  # RPC names in commit order
    end: EndState
    seconds: float
    violations: tuple[str, ...]

    def crash_points(self) -> list[tuple[str, int]]:
        seen: dict[str, int] = {}
        points = []
        for rpc in self.commits:
            seen[rpc] = seen.get(rpc, 0) + 1
            if not rpc.startswith(TIMER_RPC_PREFIX):
                points.append((rpc, seen[rpc]))
        return points

    def nth(self, rpc: str, which: int) -> tuple[str, int]:
        """('rpc', n) for the which-th commit of rpc; negative counts from the last."""
        total = self.commits.count(rpc)
        n = which if which > 0 else total + 1 + which
        if not 1 <= n <= total:
            raise LookupError(f"the clean run has {total} commits of {rpc}, not #{which}")
        return (rpc, n)


@dataclass(frozen=True)
class CaseResult:
    index: int
    point: CrashPoint
    died: bool
    reruns: int
    violations: tuple[str, ...]
    seconds: float
    note: str = ""

    @property
    def ok(self) -> bool:
        return self.died and not self.violations

    @property
    def result(self) -> str:
        if self.violations:
            extra = f" (+{len(self.violations) - 1} more)" if len(self.violations) > 1 else ""
            return f"VIOLATION: {self.violations[0]}{extra}"
        if not self.died:
            return f"NOT REACHED: {self.note}"
        return "ok" + (f" ({self.note})" if self.note else "")


@dataclass
class _Case:
    """A fresh database and home for one run sequence."""

    db: scratch_db.DbUrls
    home: Path
    runs: int = 0
    channel: ChannelProcess | None = None  # the publisher mode's fake channel


class Harness:
    """Use as a context manager: it owns the seeded database, the fork server and temp dirs."""

    def __init__(self, config: ChaosConfig | None = None) -> None:
        self.config = config or ChaosConfig()
        self._stack = ExitStack()
        self._db_lock = threading.Lock()
        self._live: set[multiprocessing.process.BaseProcess] = set()
        self._live_lock = threading.Lock()
        self._stopped = threading.Event()
        self.work = Path()
        self.media = Path()
        self.seed = ""
        self._keep_work = False
        self.grants: Grants | None = None

    # -- setup ---------------------------------------------------------------------------
    def __enter__(self) -> Harness:
        try:
            self._setup()
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopped.set()
        self._kill_live()
        self._stack.close()

    def _setup(self) -> None:
        self.work = Path(tempfile.mkdtemp(prefix="mdame-chaos-"))
        self._stack.callback(lambda: self._keep_work or shutil.rmtree(self.work, True))
        self.media = self.config.media_root or self.work / "media"
        self.media.mkdir(parents=True, exist_ok=True)
        # A migrated database with the dimension registry synced, copied for every case.
        template = scratch_db.ensure_template()
        seed = scratch_db.create_database(template, "_seed")
        self._stack.callback(scratch_db.drop_database, seed.name)
        from mdame_pipeline.dimension_registry import sync_registry

        if self.config.publisher not in PUBLISHERS:
            raise ValueError(f"publisher must be one of {PUBLISHERS}")
        niches = None
        if self.config.publisher in SERVERS:
            niches = platform_niche(
                self.config.dimension, self.work / "niches", self.config.publisher
            )
        with StateStore(seed.app, env="dev", pool_max=1) as state:
            report = sync_registry(as_admin(state), niches)
            if self.config.dimension not in report.active:
                raise ValueError(f"dimension {self.config.dimension!r} is not an active dimension")
            if self.config.publisher != "outbox":  # every case's database is a copy: seal once
                self.grants = seal_grants(state, self.config.dimension, self.work)
        close_admins(seed.name)  # the seed is a template: no session may stay on it
        self.seed = seed.name
        self._ctx = multiprocessing.get_context("forkserver")
        # The fork server imports Dagster and the definitions once; every run forks from it.
        self._ctx.set_forkserver_preload(["tests.chaos.child"])

    @contextmanager
    def _fresh(self, name: str, keep: Callable[[], bool] = lambda: False) -> Iterator[_Case]:
        with self._db_lock:  # CREATE DATABASE ... TEMPLATE wants the template to itself
            db = scratch_db.create_database(self.seed)
        home = self.work / name
        (home / "tmp").mkdir(parents=True)
        case = _Case(db, home)
        try:
            if self.grants is not None:
                server = SERVERS.get(self.config.publisher, ChannelProcess)
                case.channel = server(home / self.config.publisher, self.grants.tokens)
            yield case
        finally:
            if case.channel is not None:
                case.channel.stop()
            if not keep():
                scratch_db.drop_database(db.name)
                shutil.rmtree(home, ignore_errors=True)

    # -- runs ----------------------------------------------------------------------------
    def _env(self, case: _Case, crash: CrashPoint | None) -> dict[str, str | None]:
        return {
            "ENV": "dev",
            "MDAME_DATABASE_URL": case.db.owner,
            "MDAME_APP_DATABASE_URL": case.db.app,
            "MDAME_HOME": str(case.home),
            "MDAME_MEDIA_ROOT": str(self.media),
            "MDAME_LOG_FILE": str(case.home / "pipeline.jsonl"),
            # A SIGKILLed run leaves its temp files in its case's folder, removed with it, not
            # as empty /tmp/tmpXXXXXXXX folders (hundreds per matrix).
            "TMPDIR": str(case.home / "tmp"),
            "MDAME_LOCK_TTL_S": str(self.config.lock_ttl_s),
            "MDAME_JOB_LEASE_S": str(self.config.job_lease_s),
            MEMO_ENV: "1" if self.config.memo else None,
            CRASH_ENV: str(crash) if crash else None,
            TRACE_ENV: str(case.home / f"trace-{case.runs + 1}.txt"),
            **self._publisher_env(case),
        }

    def _publisher_env(self, case: _Case) -> dict[str, str | None]:
        if case.channel is None or self.grants is None:
            return {PUBLISHER_ENV: None}
        return {
            PUBLISHER_ENV: self.config.publisher,
            CHUNK_ENV: str(self.config.chunk_bytes),
            **case.channel.env(self.grants),
        }

    def _run(self, case: _Case, crash: CrashPoint | None = None) -> RunResult:
        from tests.chaos.child import forked_main

        env = self._env(case, crash)
        case.runs += 1
        log = case.home / f"run-{case.runs}.log"
        started = time.monotonic()
        proc = self._ctx.Process(
            target=forked_main, args=(self.config.partition_key, env, str(log))
        )
        with self._live_lock:
            if self._stopped.is_set():
                raise RuntimeError("the harness is stopping")
            proc.start()
            self._live.add(proc)
        proc.join(self.config.run_timeout_s)
        timed_out = proc.is_alive()
        if timed_out:
            proc.kill()
            proc.join()
        with self._live_lock:
            self._live.discard(proc)
        exitcode = None if timed_out else proc.exitcode
        trace = Path(str(env[TRACE_ENV]))
        commits = len(trace.read_text().splitlines()) if trace.exists() else 0
        return RunResult(exitcode, time.monotonic() - started, log, commits)

    def _kill_live(self) -> None:
        with self._live_lock:
            for proc in list(self._live):
                if proc.is_alive():
                    proc.kill()

    # -- the clean run -------------------------------------------------------------------
    def clean_run(self) -> CleanRun:
        if not any(self.media.iterdir()):
            # The first run on an empty media store stores its render and thumbnail, which
            # every later run finds there (the render step's own derived-output memo), so the
            # crash cases' runs never make those two stores: warm the store first, so that the
            # recorded run commits what theirs do and each of its crash points is reached.
            with self._fresh("warm-up") as case:
                run = self._run(case)
                if run.exitcode != 0:
                    raise RuntimeError(f"the warm-up run failed: {run.error()} (log {run.log})")
        with self._fresh("clean") as case:
            run = self._run(case)
            if run.exitcode != 0:
                raise RuntimeError(f"the clean run failed: {run.error()} (log {run.log})")
            trace = (case.home / "trace-1.txt").read_text().split()
            end = snapshot(case.db.app, case.home, self.media)
            found = violations(case.db.app, case.home, self.media, channel=case.channel)
            return CleanRun(tuple(trace), end, run.seconds, tuple(found))

    # -- one crash case ------------------------------------------------------------------
    def run_case(self, clean: CleanRun, point: CrashPoint, index: int = 0) -> CaseResult:
        """Crash at `point` on a fresh database, rerun until done, check the invariants."""
        started = time.monotonic()
        failed = False
        keep = lambda: failed and self.config.keep_failed  # noqa: E731 - read at case end
        with self._fresh(f"case-{index}-{point}".replace(":", "-"), keep) as case:
            crashed = self._run(case, point)
            last, reruns = self._rerun(case, crashed)
            found = []
            if self.loses_grant(point) and crashed.killed:
                found += self._reconnect(case)
                last = self._run(case)
                reruns += 1
            if last.exitcode != 0:
                found.append(f"did not finish after {reruns} reruns: {last.error()} ({last.log})")
            found += violations(case.db.app, case.home, self.media, clean.end, case.channel)
            failed = bool(found) or not crashed.killed
            note = "" if crashed.killed else _not_reached(crashed, point)
            if keep():
                self._keep_work = True
                note += f" [kept: database {case.db.name}, home {case.home}]"
        seconds = time.monotonic() - started
        return CaseResult(index, point, crashed.killed, reruns, tuple(found), seconds, note)

    def loses_grant(self, point: CrashPoint) -> bool:
        """TikTok retires a refresh token once it has answered its replacement: a kill between
        that answer and the commit of the new token (replace_rotated_credential, before) loses
        the grant, as it would for any client. No run can heal that; the account must ask for
        a reconnect, and publish once after it."""
        return self.config.publisher == "tiktok" and (point.rpc, point.phase) == (
            "replace_rotated_credential",
            "before",
        )

    def _reconnect(self, case: _Case) -> list[str]:
        """After a lost grant: the account waits for a reconnect (nothing posted meanwhile);
        then the operator's reconnect."""
        assert isinstance(case.channel, TikTokProcess) and self.grants is not None
        found = []
        with StateStore(case.db.app, env="dev", pool_max=1) as state:
            for account in state.list_accounts(self.config.dimension):
                status = state.account_status(account.id)
                if account.active and not status.needs_reauth:
                    found.append(f"account {account.handle} lost its grant and asks for nothing")
            if case.channel.view().videos:
                found.append("a post was made with the lost grant's replacement")
            case.channel.reconnect(state, self.grants, self.config.dimension)
        return found

    def _rerun(self, case: _Case, first: RunResult) -> tuple[RunResult, int]:
        """The next cron ticks: runs without a crash until one finishes (at most max_reruns)."""
        last, reruns = first, 0
        while last.exitcode != 0 and reruns < self.config.max_reruns:
            reruns += 1
            last = self._run(case)
        return last, reruns

    def run_cases(
        self,
        clean: CleanRun,
        points: Sequence[CrashPoint],
        progress: Callable[[CaseResult], None] | None = None,
    ) -> list[CaseResult]:
        """Every case, `jobs` at once; results in the order of `points`."""

        def one(item: tuple[int, CrashPoint]) -> CaseResult:
            result = self.run_case(clean, item[1], item[0])
            if progress is not None:
                progress(result)
            return result

        pool = ThreadPoolExecutor(max_workers=max(1, self.config.jobs))
        try:
            return list(pool.map(one, enumerate(points, 1)))
        except BaseException:  # Ctrl-C or a harness error: stop, do not run the rest
            self._stopped.set()
            pool.shutdown(wait=False, cancel_futures=True)
            self._kill_live()
            raise
        finally:
            pool.shutdown(wait=True)


def expand(points: Iterable[tuple[str, int]], phases: Sequence[str] = PHASES) -> list[CrashPoint]:
    """Each (rpc, n), before and after its commit."""
    return [CrashPoint(rpc, n, phase) for rpc, n in points for phase in phases]


def _not_reached(run: RunResult, point: CrashPoint) -> str:
    return (
        f"the run ended (exit {run.exitcode}) after {run.commits} commits without reaching "
        f"{point}: {run.error()}"
    )
