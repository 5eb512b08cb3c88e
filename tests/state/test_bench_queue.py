"""`make bench` prints the measured ratios that the README's layout section promises."""

from __future__ import annotations

import os
import re
import subprocess
import sys

from mdame_core.settings import REPO_ROOT


def test_bench_queue_prints_the_ratio_per_worker_count(cluster) -> None:
    done = subprocess.run(
        [sys.executable, "bench/queue.py", "--jobs", "20", "--workers", "1"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    last = done.stdout.strip().splitlines()[-1]
    assert re.fullmatch(
        r"ratio project/floor: 1 workers \d+\.\d\dx  \(target >= 0\.80x\)",
        last,
    ), done.stdout
    assert (
        "bench/" in (REPO_ROOT / "README.md").read_text()
        and "measured ratios" in (REPO_ROOT / "README.md").read_text()
    )
