"""`mdame demo`'s summary counts publications in the database, not runs that succeeded: a
niche whose every topic is rejected runs cleanly, publishes nothing, and the summary says so
and why (the rule, read from the topics' audit), with an exit status that agrees. Run again,
the finished day starts no run and says the same; work left for the recovery pass runs it again."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import date
from pathlib import Path

import dagster as dg
import pytest

from mdame_cli import demo
from mdame_cli import status as status_cli
from mdame_core.state import StateStore
from mdame_domain import timing
from mdame_resources.state import close_clients
from tests.state.test_fencing import hold

DAY = date(2026, 11, 29)
# Three different stories (the default trend_volume_gate), each naming the term the niche blocks.
STORIES = (
    ("Zeppelin crew sets an altitude record", "The crew flew the zeppelin higher than ever."),
    ("Harbor city orders three zeppelin ferries", "Each zeppelin ferry carries forty people."),
    ("Museum restores a 1930s zeppelin engine", "Volunteers rebuilt the zeppelin engine."),
)
ITEM = """    <item>
      <title>{title}</title>
      <link>https://example.com/airships/{n}</link>
      <guid isPermaLink="false">airships-{n}</guid>
      <pubDate>Sat, 28 Nov 2026 0{n}:00:00 +0000</pubDate>
      <description>{text}</description>
    </item>
"""
FEED = """<?xml version="1.0" encoding="UTF-8"?>
<rss version="2.0"><channel><title>Zeppelin wire</title><link>https://example.com</link>
<description>invented</description>
{items}</channel></rss>
"""
NICHE = """slug: airships
title: Airship Minute
language: en
voice: en-us
visual_style: soft gradients
palette: ["#0d47a1", "#00e5ff", "#7c4dff"]
safety_profile: general
blocked_terms: [zeppelin]
feeds: [{feed}]
keywords: [zeppelin, payload]
videos_per_day: 1
hook_threshold: 0.72
daily_budget_usd: 1.00
accounts:
  - {{platform: youtube, handle: airship-minute, daily_quota_units: 10000}}
active: true
"""


@pytest.fixture
def demo_env(fresh_db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The demo's own environment on a scratch database: its niche files, home and instance."""
    folder = tmp_path / "dimensions"
    folder.mkdir()
    feed = tmp_path / "zeppelin.xml"
    items = [ITEM.format(n=n, title=t, text=x) for n, (t, x) in enumerate(STORIES, 1)]
    feed.write_text(FEED.format(items="".join(items)))
    (folder / "airships.yaml").write_text(NICHE.format(feed=feed))
    (tmp_path / "dagster").mkdir()
    monkeypatch.setenv("MDAME_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "dagster"))
    monkeypatch.setenv("MDAME_DATABASE_URL", fresh_db.owner)
    monkeypatch.setenv("MDAME_APP_DATABASE_URL", fresh_db.app)
    monkeypatch.delenv("MDAME_MEDIA_ROOT", raising=False)
    try:
        yield folder
    finally:
        close_clients()  # before the database is dropped under the cached pools


def test_a_niche_whose_topics_are_all_rejected_is_reported_as_unpublished(
    demo_env: Path, fresh_db, capsys: pytest.CaptureFixture[str]
) -> None:
    code = demo.main(DAY, dimensions=demo_env)
    out, err = capsys.readouterr()

    assert "0/1 dimensions published (0 videos)" in out, out
    assert (
        "airships: nothing to publish: every topic was rejected: 3 by safety (blocked_term x3)"
        in out
    ), out
    assert "nothing to fix (exit status 0)" in out and code == 0, out
    with StateStore(fresh_db.app, env="dev") as state:
        topics = state.list_work_units("topic")
        assert [t.state for t in topics] == ["rejected"] * 3  # what the summary read
        assert state.list_work_units("publication") == []
    # Where the runs' time went, a line per category, the database's measured.
    breakdown = err[err.index("[demo] time: ") :].splitlines()
    for name in (*timing.CATEGORIES, timing.REMAINDER):
        assert sum(name in line for line in breakdown) == 1, (name, err)
    assert timing.totals()["database"] > 0
    # `mdame status` says the same from the same facts, with the demo's three real runs.
    with dg.DagsterInstance.get() as instance, StateStore(fresh_db.app, env="dev") as state:
        [table] = status_cli.report(instance, state, DAY, ["airships"])
    lines = table.splitlines()
    assert lines[0] == "2026-11-29|airships", table
    said = dict(line.split("  ", 1) for line in lines[2:] if not line.startswith("  "))
    said = {what.strip(): value.strip() for what, value in said.items()}
    assert said["published"] == "no: every topic was rejected: 3 by safety (blocked_term x3)"
    assert said["stage"] == "topics (3 rejected, 0 undecided)"
    for job in ("content_job", "scene_clips_job", "publishing_job"):
        assert said[f"last {job}"].startswith("success "), table
    assert said["waits"] == "nothing" and said["alerts"] == "none open", table

    # The day is finished: a second demo runs no Dagster run and reports the same from the
    # database, with the same exit status.
    runs = _dagster_runs()
    assert demo.main(DAY, dimensions=demo_env) == 0
    again, err = capsys.readouterr()
    assert "[demo] 2026-11-29|airships: finished earlier, nothing to run" in err, err
    assert "running content" not in err, err
    assert _dagster_runs() == runs
    assert _summary(again) == _summary(out), again

    # A run killed mid paid call left it unsettled: the recovery pass at the start of the next
    # run settles it, so the partition is not finished until it has run again.
    with StateStore(fresh_db.app, env="dev") as state:
        killed = hold(state, "airships", ttl=1, holder="killed")
        start = killed.begin_paid_call("airships", "voice:tts", "gemini:tts", "h", 40, None, 3, 0)
        assert start.action == "submit"
        time.sleep(1.2)  # the killed holder's lock and its call's lease run out
        assert demo.main(DAY, dimensions=demo_env) == 0
        again, err = capsys.readouterr()
        assert "2026-11-29|airships: running content" in err, err
        assert _dagster_runs() == runs + 3
        assert _summary(again) == _summary(out), again
        (status,) = state._select(
            "SELECT status FROM mdame.provider_attempts WHERE id = %s", [start.attempt_id]
        )[0]
        assert status == "failed"  # settled at its estimate by the recovery pass
        assert state.unfinished_partitions(DAY, ["airships"]) == []


def _dagster_runs() -> int:
    with dg.DagsterInstance.get() as instance:  # the demo's own (DAGSTER_HOME)
        return instance.get_runs_count()


def _summary(out: str) -> list[str]:
    """The demo's table and summary, less the line with the time it took."""
    return [line for line in out.splitlines() if " dimensions published " not in line]
