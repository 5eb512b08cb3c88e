"""Every `make bench-*` target runs, at its smallest size, as an operator types it.

A bench is the first command a new host runs (`make bench-gpu` on a GPU host), so each one is
run through make, on this checkout, and must exit 0 and print its figures. The three cheap ones
run in `make test`; the three that take a minute or more (a demo and its encode floors, the render
floor, chromium on the UI) run in `make smoke` (MDAME_SMOKE=1), outside CI's time budget.
"""

from __future__ import annotations

import os
import subprocess

import pytest

from mdame_core import settings

# target -> (BENCH_ARGS at the smallest size, a line its figures must print, runs in make test)
TARGETS: dict[str, tuple[str, str, bool]] = {
    "bench": ("--jobs 40 --workers 1", "ratio project/floor: 1 workers", True),
    "bench-gpu": ("--clips 1 --scenes 2", "scene cache (svd): day 1 planned 2 scenes", True),
    "bench-scale": ("--dims 1 --ticks 1", "(1 ticks each; target: p95", True),
    "bench-render": ("--seconds 10 --repeats 1", "ratio render/floor: wall", False),
    "bench-first-run": (
        "--dimensions tech --media-profile tiny",
        "ratio first run / floors: command",
        False,
    ),
    "bench-ui": (
        "--dims 1 --days 2 --materialized-days 1 --failed 0 --loads 1",
        "screenshot: ",
        False,
    ),
}


@pytest.mark.parametrize("target", list(TARGETS))
def test_bench_target_runs_at_its_smallest_size(target: str) -> None:
    args, figures, in_make_test = TARGETS[target]
    if not in_make_test and os.environ.get("MDAME_SMOKE") != "1":
        pytest.skip(f"make {target} takes a minute or more: `make smoke` runs it")
    env = {k: v for k, v in os.environ.items() if not k.startswith("MDAME_MEDIA_PROFILE")}
    done = subprocess.run(
        ["make", "--no-print-directory", target, f"BENCH_ARGS={args}"],
        cwd=settings.REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"make {target} exited {done.returncode}:\n{output[-4000:]}"
    assert figures in output, f"make {target} printed no figures ({figures!r}):\n{output[-4000:]}"
