"""A sampled slice of `make chaos-providers`: two SIGKILLs of the fakes demo while every local
server faults (the first under a Gemini outage), then a demo that must converge with every
check of the harness: published once to each of the niche's YouTube, TikTok and Instagram
accounts, the channels' videos and quota, the budget against Gemini's counters, nothing left
running, held or leased, and no account asking for a reconnect although the servers expired
access tokens early, the final demo's too. A fixed seed, one niche at its shortest length, so
it stays within a couple of minutes on two cores.

The same demos search for leaked credentials: every secret the servers hand out and every key
the demo is given carries a mark, the demos log with the root logger at INFO (as a forked run
worker does), and no log file, event, compute log or alert may hold the mark."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import date
from pathlib import Path

import pytest

from fakes.common import SECRET_MARK_VAR
from fakes.demo import fake_services
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR
from tests.chaos.leaks import in_alerts, in_dagster, in_files
from tests.chaos.providers import run
from tests.liveness.liveness_kit import World
from tests.scratch_db import create_database, drop_database

pytestmark = pytest.mark.slow

DAY = date(2026, 11, 29)
SEED = 20261202
MARK = "SeNtInElZq7"  # in every credential the servers and the demo hand out


@pytest.fixture
def world(fresh_db, tmp_path: Path) -> Iterator[World]:
    dagster_db = create_database(None, "_dagster")
    home = tmp_path / "home"
    home.mkdir()
    try:
        yield World(fresh_db.owner, fresh_db.app, dagster_db.owner, home)
    finally:
        drop_database(dagster_db.name)


def test_kills_while_every_server_faults_converge_on_the_next_demo(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDAME_HOME", str(world.home))  # the grants' master key lives there
    monkeypatch.setenv("ENV", "dev")
    monkeypatch.setenv(SECRET_MARK_VAR, MARK)
    niches = tmp_path / "niches"
    niches.mkdir()
    science = (DIMENSIONS_DIR / "science.yaml").read_text(encoding="utf-8")
    (niches / "science.yaml").write_text(f"{science}target_seconds: 30\n", encoding="utf-8")
    with fake_services(world.home / "fakes") as services:
        report = run(
            world,
            services,
            seed=SEED,
            kills=2,
            outage_runs=1,
            dimensions=["science"],
            day=DAY,
            logs=tmp_path,
            niches=niches,
            max_delay_s=4.0,
            bound_s=240.0,
            log=lambda line: None,
            root_info=True,
        )
        gemini = services.model.counters()
        upload_tokens = [
            p["upload_token"] for p in services.tiktok.state.data["publishes"].values()
        ]
        leaked = in_files(MARK, [tmp_path], skip=[world.home / "fakes"])
        leaked += in_dagster(MARK, world.dagster_url)
        leaked += in_alerts(MARK, world.owner_url, services.bot)

    assert report.violations == [], f"{report.table()}\n" + "\n".join(report.violations)
    assert [c.label for c in report.cases] == ["kill 1/2", "kill 2/2", "final"]
    assert "gemini outage 503" in report.cases[0].faults
    assert report.cases[-1].outcome == "exit 0"
    # Access tokens expired early were met (the final demo's too), refreshed through: no
    # account was marked needs_reauth (a violation of the harness's).
    assert report.token_refusals > 0
    # The outage was met: Gemini answered 503s before it answered anything else.
    assert gemini["by_status"].get("503", 0) > 0 and gemini["billed"]
    # Credentials were handed out and used (the mark is in them), and none was written down.
    assert MARK in services.env["GEMINI_API_KEY"] and MARK in services.env["YOUTUBE_API_KEY"]
    assert upload_tokens and all(MARK in token for token in upload_tokens)
    assert leaked == [], "\n".join(leaked)
