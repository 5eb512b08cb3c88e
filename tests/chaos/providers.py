"""`make chaos-providers`: SIGKILLs of `make demo PROVIDERS=fakes` while every server faults.

The local protocol servers (Gemini, Edge-TTS, the feeds, YouTube, Telegram, Pexels, Pixabay) run
in this process, so they outlive the demo: the demo (`python -m fakes.demo` with
MDAME_FAKES_RUNNING=1) is started as the leader of its own process group, and that whole group
is SIGKILLed `--kills` times, each a random moment (a seeded RNG) after one of its runs started.
Before each start every server is given random faults: a Gemini outage (503 to everything) over
the first `--outage-runs` demos, Gemini 429/5xx/dropped answers, the image model's outage and
faults, Pexels and Pixabay 429 bursts, 5xx and drops, Edge-TTS dropped or silent streams,
YouTube 5xx on the session, a reset mid chunk or a lost final response, TikTok and Instagram
5xx, interrupted or dropped uploads, an expired upload, a lost publish answer, Telegram 429/5xx,
and on each platform an access token expiring early at a random request.
Every niche publishes to YouTube, TikTok and Instagram (fakes.demo.demo_niches).
Then the faults stop, all but early token expiries (a routine event, drawn again for it), and
one more demo must converge:
  - it exits 0 within `--bound` seconds, and every dimension it ran published exactly once
    (one publication per active account);
  - the fake channels hold one video per publication, with the approved render's bytes, and
    each account's quota ledger equals its channel's counters;
  - no account was marked needs_reauth (an access token refused early is refreshed through);
  - the budget ledger balances and equals what the Gemini server answered and billed (image
    calls priced per image; no work key paid twice);
  - no Dagster run unfinished, no pool slot or pending claim, no leased job, no 'running' run
    record, no lock held, no provider attempt left open (tests/chaos/invariants.py).
It prints a table of the cases (one per demo) and exits 1 on any violation.

By default it uses scratch databases and a temporary home (`--fresh`, so an earlier offline
`make demo` in this checkout, whose videos are in the outbox and not on the fake channel, cannot
fail it); `--reuse` uses this checkout's database, Dagster instance and fake channel instead
(what `make demo PROVIDERS=fakes` uses, so their state builds up across sessions). Lock TTLs,
leases, graces and backoffs are shortened through their settings so a run after a kill takes
over within seconds.
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path

import psycopg

from fakes.demo import (
    RUNNING_VAR,
    FakeServices,
    clear_faults,
    connect_demo_accounts,
    demo_niches,
    fake_services,
    inject_random_faults,
    inject_token_expiries,
    token_refusals,
)
from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR
from tests.adminkit import admin_url
from tests.chaos.invariants import violations
from tests.chaos.provider_ledgers import (
    InProcessChannel,
    budget_against_gemini,
    quota_against_channels,
)
from tests.liveness.liveness_kit import REPO, Demo, World, leftovers, runs_of, wait_for

# Every wait of the product shortened through its setting: a run after a kill takes over the
# dead holder's lock, job lease, paid call and upload within seconds, and retries come fast.
SETTINGS = {
    "MDAME_LOCK_TTL_S": "3",
    "MDAME_JOB_LEASE_S": "3",
    "MDAME_GEMINI_GRACE_S": "1",
    "MDAME_UPLOAD_GRACE_S": "1",
    # A gone upload session (TikTok's expired upload_url) is searched for twice this far apart
    # before it is settled as not published and posted anew.
    "MDAME_GONE_SESSION_RECHECK_S": "1",
    "MDAME_GEMINI_BACKOFF_S": "0.05",
    "MDAME_GEMINI_BACKOFF_MAX_S": "1",
    "MDAME_STEP_RETRY_DELAY_S": "0.5",
    "MDAME_VOICE_BACKOFF_S": "1",
    "MDAME_VOICE_BACKOFF_MAX_S": "2",
    # A scene deferred by a transient provider failure (the image model's outage, a stock
    # 5xx) or a 429 without a reset is claimed again this soon.
    "MDAME_SCENE_RETRY_S": "1",
    "MDAME_STOCK_RATE_WAIT_S": "1",
    "MDAME_STOCK_BACKOFF_S": "0.05",
}


@dataclass
class Case:
    label: str
    faults: list[str]
    outcome: str = ""
    seconds: float = 0.0


@dataclass
class Report:
    seed: int
    cases: list[Case] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    seconds: float = 0.0
    unfired: int = 0  # queued faults no request took before they were stopped
    token_refusals: int = 0  # requests the platforms refused for an access token expired early

    @property
    def ok(self) -> bool:
        return not self.violations

    def table(self) -> str:
        width = max([len(c.label) for c in self.cases] + [4])
        lines = [f"{'case':<{width}}  {'s':>5}  outcome; faults"]
        for c in self.cases:
            faults = "; ".join(c.faults) or "none"
            lines.append(f"{c.label:<{width}}  {c.seconds:>5.0f}  {c.outcome}; {faults}")
        return "\n".join(lines)


# The demo as a run worker forked by `mdame run-server` logs: the root logger at INFO to stderr,
# so any library's INFO line (a request URL) reaches the log.
_LOGGED_AT_INFO = (
    "import logging, runpy; logging.basicConfig(level=logging.INFO); "
    "runpy.run_module('fakes.demo', run_name='__main__', alter_sys=True)"
)


def _demo(
    world: World,
    env: dict[str, str],
    log: Path,
    dimensions: Sequence[str],
    day: date,
    niches: Path | None,
    root_info: bool = False,
) -> Demo:
    """`make demo PROVIDERS=fakes`'s process (its group's leader), using this process's servers;
    `root_info`: with the root logger at INFO."""
    start = ["-c", _LOGGED_AT_INFO] if root_info else ["-m", "fakes.demo"]
    args = [sys.executable, *start, "--day", day.isoformat()]
    args += [f"--dimension={d}" for d in dimensions]
    args += [f"--niches={niches}"] if niches else []
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(
        args,
        cwd=REPO,
        env=world.env(**env),
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    out.close()
    return Demo(proc, log)


def _kill_at_random(
    world: World, demo: Demo, rng: random.Random, runs_per_demo: int, max_delay_s: float
) -> str:
    """SIGKILLs the demo's group a random moment (up to max_delay_s) after its k-th run
    started, k drawn from 1..runs_per_demo. Returns where the kill landed."""
    k = rng.randint(1, runs_per_demo)
    delay = rng.uniform(0.0, max_delay_s)
    try:
        wait_for(
            f"the demo's run {k} (or its exit)",
            lambda: len(runs_of(world, demo.proc.pid)) >= k or demo.proc.poll() is not None,
            600,
        )
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and demo.proc.poll() is None:
            time.sleep(0.05)
        if demo.proc.poll() is not None:
            return f"exited {demo.proc.returncode} before the kill"
        return f"killed {delay:.1f}s after run {k}/{runs_per_demo} started"
    finally:  # also when this process is interrupted: leave no demo running
        demo.killpg(signal.SIGKILL)
        demo.proc.wait()


def _published_once(app_url: str, dimensions: Sequence[str], day: date) -> list[str]:
    """Every dimension run published the day's video exactly once: one published publication
    per active account."""
    found = []
    with psycopg.connect(app_url, autocommit=True) as conn:
        rows = conn.execute(
            """SELECT d.slug, count(DISTINCT a.id) FILTER (WHERE a.active),
                      count(p.id) FILTER (WHERE p.state = 'published' AND s.partition_date = %s)
                 FROM mdame.dimensions d
                 JOIN mdame.dimension_accounts a ON a.dimension_id = d.id
                 LEFT JOIN mdame.publications p ON p.account_id = a.id
                 LEFT JOIN mdame.scripts s ON s.id = p.script_id
                WHERE d.active GROUP BY d.slug ORDER BY d.slug""",
            [day],
        ).fetchall()
    for slug, accounts, published in rows:
        if dimensions and slug not in dimensions:
            continue
        if published != accounts:
            found.append(f"{slug}: {published} published publications, {accounts} accounts")
    return found


def _reconnects_asked(app_url: str) -> list[str]:
    """Every account marked needs_reauth: none of the faults revokes a grant, so none may."""
    with psycopg.connect(app_url, autocommit=True) as conn:
        rows = conn.execute(
            """SELECT platform, handle FROM mdame.dimension_accounts
                WHERE needs_reauth ORDER BY platform, handle"""
        ).fetchall()
    return [f"account {handle} ({platform}) was marked needs_reauth" for platform, handle in rows]


def _left_behind(world: World) -> list[str]:
    left = leftovers(world)
    found = [f"Dagster run {run_id} left {status}" for run_id, status in left.unfinished_runs]
    found += [f"pool slot held by run {run_id}" for run_id in left.slot_holders]
    if left.pending_steps:
        found.append(f"{left.pending_steps} pending pool claims")
    if left.leased_jobs:
        found.append(f"{left.leased_jobs} jobs still leased")
    if left.running_rows:
        found.append(f"{left.running_rows} run records still 'running'")
    return found


def run(
    world: World,
    services: FakeServices,
    *,
    seed: int,
    kills: int,
    outage_runs: int,
    dimensions: Sequence[str],
    day: date,
    logs: Path,
    niches: Path | None = None,
    max_delay_s: float = 8.0,
    bound_s: float = 900.0,
    log: Callable[[str], None] = print,
    root_info: bool = False,
) -> Report:
    """The kills under faults, then the converging demo and every check (see the module);
    `root_info`: every demo logs with the root logger at INFO."""
    rng = random.Random(seed)
    report = Report(seed)
    started = time.monotonic()
    since = datetime.now(UTC)
    env = {**services.env, **SETTINGS, RUNNING_VAR: "1"}
    # The niches as the demo reads them (each also posting to TikTok), and the operator's part
    # of the demo: the registry and the channels' grants.
    niches = demo_niches(niches or DIMENSIONS_DIR, logs / "demo-niches")
    with StateStore(admin_url(world.app_url), role="admin", env="dev") as admin:
        connect_demo_accounts(services, admin, niches)
    # Three runs per dimension: content, scene clips, publishing; under the outage only the
    # content runs start (each fails).
    dimension_count = len(dimensions) or len(list(niches.glob("*.yaml")))
    for n in range(kills):
        outage = n < outage_runs
        case = Case(f"kill {n + 1}/{kills}", inject_random_faults(services, rng, outage))
        at = time.monotonic()
        demo = _demo(world, env, logs / f"demo-{n}.log", dimensions, day, niches, root_info)
        runs = dimension_count * (1 if outage else 3)
        case.outcome = _kill_at_random(world, demo, rng, runs, max_delay_s)
        case.seconds = time.monotonic() - at
        report.cases.append(case)
        log(f"{case.label}: {case.outcome} ({'; '.join(case.faults) or 'no faults'})")
    report.unfired = clear_faults(services)
    final = Case("final", ["the faults stopped", *inject_token_expiries(services, rng)])
    at = time.monotonic()
    demo = _demo(world, env, logs / "demo-final.log", dimensions, day, niches, root_info)
    try:
        code = demo.wait(bound_s)
        final.outcome = f"exit {code}"
        if code != 0:
            report.violations.append(f"the final demo exited {code}:\n{demo.tail(15)}")
    except AssertionError as exc:
        final.outcome = "timed out"
        report.violations.append(str(exc))
    final.seconds = time.monotonic() - at
    report.cases.append(final)
    channel = InProcessChannel(services.channel, services.tiktok, services.instagram)
    media = world.home / "media"
    found = violations(world.app_url, world.home, media, channel=channel)
    # Quota is compared below with one uncertain call allowed per kill, not per case.
    report.violations += [v for v in found if not v.startswith("quota of account")]
    report.violations += quota_against_channels(world.app_url, channel, kills=kills)
    report.violations += _published_once(world.app_url, dimensions, day)
    report.violations += _reconnects_asked(world.app_url)
    report.token_refusals = token_refusals(services)
    report.violations += budget_against_gemini(
        world.app_url, services.model.counters(), killed=kills > 0, since=since
    )
    report.violations += _left_behind(world)
    report.seconds = time.monotonic() - started
    return report


def _here() -> World:
    from mdame_core import settings
    from mdame_core.dagster_home import dagster_environment

    home = settings.mdame_home()
    return World(
        settings.database_url("owner"),
        settings.database_url("app"),
        dagster_environment()["MDAME_DAGSTER_DATABASE_URL"],
        home,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], epilog="make chaos-providers ARGS='--seed 7 --kills 2'"
    )
    parser.add_argument("--seed", type=int, default=None, help="the RNG's seed (random if unset)")
    parser.add_argument("--kills", type=int, default=4, help="SIGKILLs before the final demo")
    parser.add_argument(
        "--outage-runs", type=int, default=2, help="demos the Gemini outage lasts (default 2)"
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--fresh", action="store_true", default=True, help="scratch databases, temp home (default)"
    )
    where.add_argument(
        "--reuse",
        dest="fresh",
        action="store_false",
        help="this checkout's database and fake channel (only fake-channel publications there)",
    )
    parser.add_argument("--dimension", action="append", default=[], help="only these (repeat)")
    parser.add_argument(
        "--max-delay", type=float, default=8.0, help="latest kill after the chosen run starts (s)"
    )
    parser.add_argument("--bound", type=float, default=900.0, help="final demo's bound (s)")
    parser.add_argument("--day", type=date.fromisoformat, default=None, help="YYYY-MM-DD")
    parser.add_argument("--niches", type=Path, default=None, help="niche files' folder")
    args = parser.parse_args(argv)
    os.environ.setdefault("ENV", "dev")  # as make exports it; the demos run with dev too
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    day = args.day or datetime.now(UTC).date()
    logs = Path(tempfile.mkdtemp(prefix="mdame-chaos-providers-"))
    cleanup: Callable[[], None] | None = None
    if args.fresh:
        from tests.scratch_db import create_database, drop_database, ensure_template

        db, dagster_db = create_database(ensure_template()), create_database(None, "_dagster")
        world = World(db.owner, db.app, dagster_db.owner, logs / "home")
        world.home.mkdir()

        def cleanup() -> None:
            drop_database(db.name)
            drop_database(dagster_db.name)
    else:
        world = _here()
    print(
        f"chaos-providers: seed {seed}, {args.kills} kills, Gemini outage over "
        f"{min(args.outage_runs, args.kills)} demos, day {day}, logs in {logs}"
    )
    try:
        # The servers and the grants' master key belong to the world's home, as the demo's do.
        saved = os.environ.get("MDAME_HOME")
        os.environ["MDAME_HOME"] = str(world.home)
        try:
            with fake_services(world.home / "fakes") as services:
                report = run(
                    world,
                    services,
                    seed=seed,
                    kills=args.kills,
                    outage_runs=args.outage_runs,
                    dimensions=args.dimension,
                    day=day,
                    logs=logs,
                    niches=args.niches,
                    max_delay_s=args.max_delay,
                    bound_s=args.bound,
                )
        finally:
            if saved is None:
                os.environ.pop("MDAME_HOME", None)
            else:
                os.environ["MDAME_HOME"] = saved
        print(report.table())
        print(
            f"{len(report.cases)} cases in {report.seconds:.0f}s (seed {seed}); "
            f"{report.unfired} queued faults were never taken; "
            f"{report.token_refusals} requests refused for a token expired early"
        )
        for line in report.violations:
            print(f"VIOLATION: {line}")
        print("PASS" if report.ok else "FAIL")
        return 0 if report.ok else 1
    finally:
        if cleanup is not None:
            cleanup()


if __name__ == "__main__":
    sys.exit(main())
