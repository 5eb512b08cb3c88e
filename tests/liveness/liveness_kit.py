"""What the liveness tests share: one MD-AME database and one persistent Dagster instance (its
storage on PostgreSQL, a DAGSTER_HOME on disk) that `mdame demo` processes are started
against, killed and started again; and read-only probes of what those runs left behind.

`python tests/liveness/liveness_kit.py demo DAY DIMENSION...` is the demo child: what `mdame
demo` does (the Dagster environment, then mdame_cli.demo.main), limited to some dimensions.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg

from mdame_runtime.liveness import FINISHED, PID_TAG

REPO = Path(__file__).resolve().parents[2]
DAY = date(2026, 11, 29)


@dataclass
class World:
    """One database, one Dagster instance, one home: everything a sequence of demos shares."""

    owner_url: str
    app_url: str
    dagster_url: str
    home: Path

    def env(self, **extra: str) -> dict[str, str]:
        # Imported here: the demo child runs this file as a script, without the repository
        # on its path.
        from tests.childenv import child_environ

        env = child_environ("DAGSTER_")
        env.update(
            ENV="dev",
            MDAME_DATABASE_URL=self.owner_url,
            MDAME_APP_DATABASE_URL=self.app_url,
            MDAME_DAGSTER_DATABASE_URL=self.dagster_url,
            MDAME_HOME=str(self.home),
            DAGSTER_HOME=str(self.home / "dagster"),
            MDAME_LOG_FILE=str(self.home / "logs" / "pipeline.jsonl"),
            PYTHONUNBUFFERED="1",
        )
        env.update(extra)
        return env

    @contextmanager
    def instance(self) -> Iterator[dg.DagsterInstance]:
        """The same instance the demos use (DAGSTER_HOME's dagster.yaml, this storage)."""
        (self.home / "dagster").mkdir(parents=True, exist_ok=True)
        link = self.home / "dagster" / "dagster.yaml"
        if not link.exists():
            link.symlink_to(REPO / "dagster.yaml")
        saved = os.environ.get("MDAME_DAGSTER_DATABASE_URL")
        os.environ["MDAME_DAGSTER_DATABASE_URL"] = self.dagster_url
        try:
            with dg.DagsterInstance.from_config(str(self.home / "dagster")) as instance:
                yield instance
        finally:
            if saved is None:
                os.environ.pop("MDAME_DAGSTER_DATABASE_URL", None)
            else:
                os.environ["MDAME_DAGSTER_DATABASE_URL"] = saved


@dataclass
class Demo:
    """A demo process, leader of its own process group (so it can be killed as `make demo`'s
    whole group is)."""

    proc: subprocess.Popen
    log: Path
    started: float = field(default_factory=time.monotonic)

    @classmethod
    def start(
        cls, world: World, log: Path, dimensions: Sequence[str], day: date = DAY, **env: str
    ) -> Demo:
        out = open(log, "ab")  # noqa: SIM115 - the child owns it
        proc = subprocess.Popen(
            [sys.executable, __file__, "demo", day.isoformat(), *dimensions],
            cwd=REPO,
            env=world.env(**env),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        return cls(proc, log)

    def killpg(self, signum: int = signal.SIGKILL) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signum)

    def wait(self, timeout: float) -> int:
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.killpg()
            self.proc.wait()
            raise AssertionError(
                f"demo still running after {timeout}s; log tail:\n{self.tail()}"
            ) from None

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


def wait_for(what: str, ready: Callable[[], Any], timeout: float, every: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = ready()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(every)


def rows(url: str, query: str, args: Any = ()) -> list[tuple[Any, ...]]:
    with psycopg.connect(url, autocommit=True) as conn:
        return conn.execute(query, args).fetchall()


def slot_holders(world: World) -> list[str]:
    """Runs holding a pool slot, read straight from Dagster's storage."""
    try:
        found = rows(
            world.dagster_url, "SELECT run_id FROM concurrency_slots WHERE run_id IS NOT NULL"
        )
    except psycopg.errors.UndefinedTable:  # no run has got that far yet
        return []
    return [r[0] for r in found]


def runs_of(world: World, pid: int) -> list[str]:
    """Dagster runs tagged as owned by process `pid` (the demo tags its in-process runs)."""
    try:
        found = rows(
            world.dagster_url,
            "SELECT run_id FROM run_tags WHERE key = %s AND value = %s",
            (PID_TAG, str(pid)),
        )
    except psycopg.errors.UndefinedTable:
        return []
    return [r[0] for r in found]


def kill_sequence(
    world: World,
    tmp: Path,
    dimensions: Sequence[str],
    kills: int,
    rng: random.Random,
    *,
    runs_per_demo: int,
    max_delay_s: float,
    day: date = DAY,
    first_at_gpu_slot: bool = True,
    log: Callable[[str], None] = print,
) -> list[str]:
    """Start the demo and SIGKILL its whole process group `kills` times. The first kill (if
    asked) lands while a scene_clip step holds the gpu pool slot (the headline case); each other one
    a random moment (up to `max_delay_s`) after the demo's k-th run started, k drawn from
    1..runs_per_demo, so it lands while there is work left. Returns where each kill landed."""
    moments = []
    for n in range(kills):
        demo = Demo.start(world, tmp / f"demo-{n}.log", dimensions, day)
        try:
            if n == 0 and first_at_gpu_slot:
                # On a long-lived database today's clips may all exist already: then the demo
                # finishes without ever taking the slot, and the kill lands after its exit.
                wait_for(
                    "a scene_clip step to hold the gpu slot (or the demo's exit)",
                    lambda proc=demo.proc: slot_holders(world) or proc.poll() is not None,
                    240,
                )
                where = "while a scene_clip step held the gpu slot"
            else:
                k = rng.randint(1, runs_per_demo)
                wait_for(
                    f"the demo's run {k} (or its exit)",
                    lambda proc=demo.proc, k=k: (
                        len(runs_of(world, proc.pid)) >= k or proc.poll() is not None
                    ),
                    600,
                )
                delay = rng.uniform(0.0, max_delay_s)
                deadline = time.monotonic() + delay
                while time.monotonic() < deadline and demo.proc.poll() is None:
                    time.sleep(0.05)
                where = f"{delay:.1f}s after its run {k} of {runs_per_demo} started"
            if demo.proc.poll() is not None:
                where = f"after the demo had exited ({demo.proc.returncode}): no kill"
        finally:  # also when this process is interrupted: leave no demo running
            at = round(time.monotonic() - demo.started, 1)
            demo.killpg(signal.SIGKILL)
            demo.proc.wait()
        moments.append(f"{at}s {where}")
        log(f"kill {n + 1}/{kills}: SIGKILL of the demo's process group at {moments[-1]}")
    return moments


@dataclass
class Leftovers:
    """What a finished sequence must not leave behind."""

    unfinished_runs: list[tuple[str, str]]
    slot_holders: list[str]
    pending_steps: int
    leased_jobs: int
    running_rows: int
    duplicate_publications: list[tuple[Any, ...]]
    published: int
    outbox_entries: int

    @property
    def clean(self) -> bool:
        return not (
            self.unfinished_runs
            or self.slot_holders
            or self.pending_steps
            or self.leased_jobs
            or self.running_rows
            or self.duplicate_publications
            or self.outbox_entries != self.published
        )


def leftovers(world: World) -> Leftovers:
    with world.instance() as instance:
        unfinished = [
            (r.dagster_run.run_id, r.dagster_run.status.value)
            for r in instance.get_run_records()
            if r.dagster_run.status not in FINISHED
        ]
    try:
        pending = rows(world.dagster_url, "SELECT count(*) FROM pending_steps")[0][0]
    except psycopg.errors.UndefinedTable:
        pending = 0
    dup = rows(
        world.app_url,
        """SELECT script_id, account_id, count(*) FROM mdame.publications
            GROUP BY script_id, account_id HAVING count(*) > 1""",
    )
    return Leftovers(
        unfinished_runs=unfinished,
        slot_holders=slot_holders(world),
        pending_steps=pending,
        leased_jobs=rows(world.app_url, "SELECT count(*) FROM mdame.jobs WHERE state = 'running'")[
            0
        ][0],
        running_rows=rows(
            world.app_url, "SELECT count(*) FROM mdame.pipeline_runs WHERE status = 'running'"
        )[0][0],
        duplicate_publications=dup,
        published=rows(
            world.app_url, "SELECT count(*) FROM mdame.publications WHERE state = 'published'"
        )[0][0],
        outbox_entries=len(list((world.home / "outbox").glob("*/*/video.mp4"))),
    )


def _demo_child(day: str, dimensions: Sequence[str]) -> int:
    from mdame_core.dagster_home import apply_dagster_environment

    apply_dagster_environment()
    Path(os.environ["MDAME_LOG_FILE"]).parent.mkdir(parents=True, exist_ok=True)
    from mdame_cli.demo import main

    return main(date.fromisoformat(day), only=dimensions)


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "demo":
        sys.exit(_demo_child(sys.argv[2], sys.argv[3:]))
    sys.exit(f"usage: {sys.argv[0]} demo DAY DIMENSION...")
