"""A fresh `mdame demo` next to the encode floors of the videos it published.

On scratch databases of the local cluster and a scratch MDAME_HOME (no scene cache, no
media: a first run), it runs `mdame demo` as a user does, offline providers and the product's
media profile, and times it (wall, and CPU of it and its children). Then, for each video it
published, the floor: one ffmpeg encode of that many seconds of pre-scaled 1080x1920 video and
a 48 kHz voice with the render's codec settings and no filters (bench/render.py's floor),
timed before and after the demo, the two averaged. It prints the demo's own breakdown, and the
ratios demo / sum of floors, for the whole command and for its runs alone (target: at most
1.5x).

    PYTHONPATH=. ENV=dev python -m bench.first_run
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.render import _cpu_children, _prepare, _timed
from bench.scratch import scratch_databases
from mdame_domain.dimensions import load_dimension_file
from mdame_domain.mediatools import run_tool
from mdame_domain.probe import probe_media

REPO = Path(__file__).resolve().parent.parent
RUNS_LINE = re.compile(r"\[demo\] time: ([0-9.]+) s of runs")


def _floor_seconds(floor_args: list[str], seconds: float) -> float:
    args = list(floor_args)
    args[args.index("-t") + 1] = f"{seconds:.6f}"
    wall, _ = _timed(lambda: run_tool(args, timeout=1200))
    return wall


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--dimensions",
        default="",
        help="comma-separated niche files of dimensions/ to run (default: all of them)",
    )
    parser.add_argument(
        "--media-profile",
        default="",
        help="MDAME_MEDIA_PROFILE of the demo (default: the product's frame, as make demo)",
    )
    args = parser.parse_args(argv)
    style = load_dimension_file(REPO / "dimensions" / "tech.yaml").captions
    with (
        tempfile.TemporaryDirectory(prefix="mdame-bench-first-run-") as tmp,
        scratch_databases("first_run") as (owner, app_url, dagster_url),
    ):
        home = Path(tmp) / "home"
        env = {
            **os.environ,
            "MDAME_HOME": str(home),
            "MDAME_LOG_FILE": str(Path(tmp) / "pipeline.jsonl"),
            "MDAME_DAGSTER_DATABASE_URL": dagster_url,
            "MDAME_DATABASE_URL": owner,
            "MDAME_APP_DATABASE_URL": app_url,
        }
        env.pop("MDAME_MEDIA_PROFILE", None)  # the product's videos, as `make demo` makes them
        if args.media_profile:
            env["MDAME_MEDIA_PROFILE"] = args.media_profile
        if args.dimensions:
            niches = Path(tmp) / "niches"
            niches.mkdir()
            for name in args.dimensions.split(","):
                source = REPO / "dimensions" / f"{name.strip()}.yaml"
                if not source.is_file():
                    parser.error(f"--dimensions: no niche file {source}")
                shutil.copy(source, niches / source.name)
            env["MDAME_DIMENSIONS_DIR"] = str(niches)
        # The floors' inputs, long enough for any demo video (prepared once, not timed).
        work = Path(tmp) / "floor"
        work.mkdir()
        _, floor_args = _prepare(work, 70.0, style)

        wall, cpu = time.perf_counter(), _cpu_children()
        demo = subprocess.run(
            [str(REPO / ".venv" / "bin" / "mdame"), "demo"],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        demo_wall, demo_cpu = time.perf_counter() - wall, _cpu_children() - cpu
        if demo.returncode != 0:
            sys.exit(f"mdame demo failed ({demo.returncode}):\n{demo.stdout}\n{demo.stderr}")
        found = RUNS_LINE.search(demo.stderr)  # the breakdown goes to stderr
        runs = float(found.group(1)) if found else float("nan")
        videos = sorted((home / "outbox").glob("*/*/video.mp4"))
        durations = [probe_media(str(v)).duration_s for v in videos]
        before = [_floor_seconds(floor_args, d) for d in durations]
        after = [_floor_seconds(floor_args, d) for d in durations]
        floors = [(b + a) / 2 for b, a in zip(before, after, strict=True)]

        print(f"{len(videos)} videos, {sum(durations):.1f} s of video, {os.cpu_count()} CPUs")
        for line in demo.stderr.splitlines():
            if line.startswith("[demo]   "):
                print(line)
        for video, seconds, b, a in zip(videos, durations, before, after, strict=True):
            print(f"  floor {video.parent.parent.name:10s} {seconds:5.1f} s video: "
                  f"{b:5.2f} s before, {a:5.2f} s after")  # fmt: skip
        total = sum(floors)
        print(f"mdame demo: wall {demo_wall:.1f} s, CPU {demo_cpu:.1f} s; its runs {runs:.1f} s")
        print(f"sum of the encode floors: {total:.1f} s")
        print(f"ratio first run / floors: command {demo_wall / total:.2f}x, "
              f"runs {runs / total:.2f}x  (target <= 1.5x)")  # fmt: skip
        if args.media_profile:
            print(f"(the demo made {args.media_profile} media and the floors the product's frame: "
                  "a check that the bench runs, not a ratio to report)")  # fmt: skip


if __name__ == "__main__":
    main()
