"""`make chaos-sequence`: the issue's acceptance for liveness after crashes, on one database.

The demo (every active dimension, today's partition) is started and its whole process group
SIGKILLed N times (5 by default) at random moments: the first while scene_clips holds the gpu
pool's only slot, the others at a random moment after the demo's first run started. Then the
demo runs once more, and must finish within a bound, leaving no unfinished Dagster run, no pool
slot or pending claim, no leased job, no 'running' run record, no duplicate publication, and
one outbox entry per publication.

By default it uses this checkout's own database and Dagster instance, exactly what `make demo`
uses (so a plain `make demo` afterwards shows the result); `--fresh` uses scratch databases
and a temporary home instead. Prints the measured times; exits 1 on any violation.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from liveness_kit import REPO, Demo, World, kill_sequence, leftovers


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


def _active_dimensions() -> int:
    """How many dimensions the demo will run (the files the registry syncs)."""
    return len(list((REPO / "dimensions").glob("*.yaml")))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument(
        "--max-delay", type=float, default=8.0, help="latest kill after the chosen run starts (s)"
    )
    parser.add_argument("--bound", type=float, default=900.0, help="completion bound (s)")
    parser.add_argument("--fresh", action="store_true", help="scratch databases, temp home")
    parser.add_argument("--dimension", action="append", default=[], help="only these (repeat)")
    args = parser.parse_args(argv)
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(1 << 30)
    rng = random.Random(seed)
    day = datetime.now(UTC).date()
    logs = Path(tempfile.mkdtemp(prefix="mdame-chaos-sequence-"))
    cleanup = None
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
    print(f"chaos-sequence: seed {seed}, {args.kills} kills, day {day}, logs in {logs}")
    try:
        started = time.monotonic()
        moments = kill_sequence(
            world,
            logs,
            args.dimension,
            args.kills,
            rng,
            # Three jobs per dimension: content, scene clips, publishing.
            runs_per_demo=3 * (len(args.dimension) or _active_dimensions()),
            max_delay_s=args.max_delay,
            day=day,
        )
        killed_for = time.monotonic() - started
        before = leftovers(world)
        landed = [m for m in moments if "no kill" not in m]
        print(
            f"after the kills ({killed_for:.0f}s, {len(landed)} landed while the demo worked): "
            f"{len(before.unfinished_runs)} unfinished "
            f"runs, {len(before.slot_holders)} slot holders, {before.pending_steps} pending "
            f"claims, {before.leased_jobs} leased jobs, {before.running_rows} running records"
        )
        final = Demo.start(world, logs / "demo-final.log", args.dimension, day)
        try:
            code = final.wait(args.bound)
        except AssertionError as exc:
            print(f"FAIL: {exc}")
            return 1
        completed_in = time.monotonic() - final.started
        after = leftovers(world)
        print(final.tail(12))
        print(f"final demo: exit {code} in {completed_in:.0f}s (bound {args.bound:.0f}s)")
        print(f"left behind: {after}")
        ok = code == 0 and after.clean and after.published > 0
        print("PASS" if ok else "FAIL")
        return 0 if ok else 1
    finally:
        if cleanup is not None:
            cleanup()


if __name__ == "__main__":
    sys.exit(main())
