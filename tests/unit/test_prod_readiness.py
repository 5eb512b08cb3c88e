"""ENV=prod with the repository's sample feed files (or non-production providers) is refused up
front with a message that says prod needs live sources and the production providers."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

from mdame_core.settings import REPO_ROOT
from mdame_domain.dimensions import load_registry
from mdame_domain.feed_sources import FeedSource
from mdame_domain.prod_readiness import prod_problems

DIMENSIONS = load_registry(REPO_ROOT / "dimensions").dimensions


def test_sample_feed_files_and_fake_providers_are_named() -> None:
    problems = prod_problems(DIMENSIONS, "fakes")
    assert problems[0].startswith("MDAME_PROVIDERS=fakes")
    cooking = [p for p in problems if "'cooking'" in p]
    assert cooking and "feeds/cooking.json" in cooking[0] and "sources:" in cooking[0]


def test_live_sources_and_production_providers_pass() -> None:
    trends = FeedSource("google_trends", region="US")
    live = [replace(d, sources=(trends,)) for d in DIMENSIONS]  # files beside a live source
    assert prod_problems(live, "production") == []
    assert prod_problems([replace(d, active=False) for d in DIMENSIONS], "production") == []


def test_mdame_demo_with_env_prod_says_why_in_one_line(tmp_path) -> None:
    env = {**os.environ, "ENV": "prod", "MDAME_HOME": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("MDAME_PROVIDERS", None)
    done = subprocess.run(
        [sys.executable, "-m", "mdame_cli.main", "demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "ENV=prod needs live trend sources and the production providers" in lines[0]
    assert "feeds/cooking.json" in lines[0] and "unknown url type" not in lines[0]
