"""The trends asset on live sources, end to end for one partition: real httpx against the local
feed server, the conditional-GET cache and the failure events in real PostgreSQL, the YouTube key
from the environment through selection.py's dg.EnvVar, and never in any log, event, metadata or
exception."""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import psycopg
import pytest
import yaml
from dagster._serdes import serialize_value

from fakes.feeds import INJECTION_TEXT, FeedServer, running
from mdame_assets.defs.topics.assets import topics
from mdame_assets.defs.trends.assets import trends
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR
from mdame_resources.providers.selection import production_providers
from mdame_runtime.partition_keys import partition_key
from tests.adminkit import admin_connect

DAY = datetime.now(UTC).date()  # the fake dates its stories hours before now
ROOT_ENVS = ("MDAME_YOUTUBE_ROOT_URL", "MDAME_GOOGLE_TRENDS_ROOT_URL", "MDAME_REDDIT_ROOT_URL")


@pytest.fixture
def marker(monkeypatch: pytest.MonkeyPatch) -> str:
    """A unique YouTube key, set where production reads it (YOUTUBE_API_KEY)."""
    key = f"AIzaMARKER{uuid.uuid4().hex}"
    monkeypatch.setenv("YOUTUBE_API_KEY", key)
    return key


@pytest.fixture
def fake(marker: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FeedServer]:
    with running(youtube_key=marker) as server:
        for name in ROOT_ENVS:
            monkeypatch.setenv(name, server.base_url)
        yield server


@pytest.fixture
def live(pipeline: Any) -> Any:
    """The pipeline with the production trend source (the rest stays offline)."""
    pipeline.resources["trend_source"] = production_providers()["trend_source"]
    return pipeline


def _dimension(pipeline: Any, tmp_path: Path, sources: list[dict[str, Any]], **extra: Any) -> None:
    data = yaml.safe_load((DIMENSIONS_DIR / "tech.yaml").read_text())
    data.pop("feeds")
    data.update(sources=sources, **extra)
    folder = tmp_path / "dimensions"
    folder.mkdir(exist_ok=True)
    (folder / "tech.yaml").write_text(yaml.safe_dump(data))
    assert pipeline.sync(folder) == ["tech"]


def _sources(fake: FeedServer) -> list[dict[str, Any]]:
    return [
        {"type": "rss", "url": f"{fake.base_url}/feeds/rss.xml"},
        {"type": "google_trends", "region": "US"},
        {"type": "youtube_most_popular", "region": "US", "category": 28, "limit": 5},
        {"type": "youtube_most_popular", "region": "GB"},
        {"type": "reddit_top", "subreddit": "technology"},
    ]


def _run(pipeline: Any, *assets: Any) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        list(assets) or [trends],
        partition_key=str(partition_key(DAY, "tech")),
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )


def _metadata(result: dg.ExecuteInProcessResult, asset: str = "trends") -> dict[str, Any]:
    [materialization] = result.asset_materializations_for_node(asset)
    return {k: v.value for k, v in materialization.metadata.items()}


def _failures(result: dg.ExecuteInProcessResult) -> list[str]:
    """Each failure event's message and, for a step failure, its error's text."""
    texts = []
    for event in result.all_events:
        if event.is_failure:
            error = getattr(event.event_specific_data, "error", None)
            texts.append(f"{event.message} {error.to_string() if error else ''}")
    return texts


def _events(pipeline: Any) -> list[dict[str, Any]]:
    with psycopg.connect(pipeline.state.url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT detail FROM mdame.events WHERE subject_kind = 'feed_source' ORDER BY id"
        ).fetchall()
    return [row[0] for row in rows]


def test_one_partition_end_to_end_skips_a_failing_source_then_reuses_304s(
    live: Any, fake: FeedServer, tmp_path: Path
) -> None:
    _dimension(live, tmp_path, _sources(fake))
    fake.set_fault("reddit", "500")

    first = _run(live)

    assert first.success, _failures(first)
    metadata = _metadata(first)
    assert [(s["kind"], s["status"]) for s in metadata["sources"]] == [
        ("rss", "fetched"),
        ("google_trends", "fetched"),
        ("youtube_most_popular", "fetched"),
        ("youtube_most_popular", "fetched"),
    ]
    reddit = f"{fake.base_url}/r/technology/top.json?t=day&limit=25&raw_json=1"
    assert metadata["skipped_sources"] == [
        {"source": reddit, "reason": "HTTP 500 Internal Server Error"}
    ]
    assert metadata["kept"] >= 3
    [event] = _events(live)
    assert (event["source"], event["reason"]) == (reddit, "HTTP 500 Internal Server Error")
    assert event["execution_id"] == first.run_id
    # 6 RSS + 6 Google Trends + 5 + 6 YouTube items; RSS and YouTube tell the same stories
    # (dedupe keeps one of each), Google Trends names them by their search terms.
    assert (metadata["feed_items"], metadata["after_dedupe"]) == (23, 12)
    assert reddit not in {t.payload["source"] for t in live.state.list_work_units("trend")}

    # The next run of the partition: the feeds answer 304 and the cached items are reused.
    fake.set_fault("reddit", None)
    second = _run(live)
    assert second.success, _failures(second)
    statuses = [s["status"] for s in _metadata(second)["sources"]]
    assert statuses == ["not_modified"] * 4 + ["fetched"]
    assert _metadata(second)["kept"] >= metadata["kept"]


def test_the_stage_fails_naming_every_source_when_all_fail(
    live: Any, fake: FeedServer, tmp_path: Path
) -> None:
    _dimension(live, tmp_path, _sources(fake)[:3])
    fake.set_fault("*", "500")
    fake.faults.push("google_trends", "malformed_xml")

    result = _run(live)

    assert not result.success
    message = " ".join(_failures(result))
    assert "every trend source failed" in message
    assert f"{fake.base_url}/feeds/rss.xml: HTTP 500 Internal Server Error" in message
    assert f"{fake.base_url}/trending/rss?geo=US: malformed XML" in message
    assert "/youtube/v3/videos?part=snippet,statistics&chart=mostPopular&regionCode=US" in message
    assert len(_events(live)) == 3
    assert live.state.list_work_units("trend") == []


def test_injection_text_in_a_feed_is_blocked_at_topics(
    live: Any, fake: FeedServer, tmp_path: Path
) -> None:
    # More video slots than stories: topics decides every trend, whatever their ranking.
    _dimension(live, tmp_path, _sources(fake)[:1], videos_per_day=10)
    fake.set_fault("rss", "injection")

    result = _run(live, trends, topics)

    assert result.success, _failures(result)
    injected = [
        t for t in live.state.list_work_units("trend") if INJECTION_TEXT in t.payload["summary"]
    ]
    assert len(injected) == 1, "the feed text reached the stored trend unchanged"
    with psycopg.connect(live.state.url, autocommit=True) as conn:
        rows = conn.execute(
            """SELECT s.verdict, s.rule, s.reasons, o.state FROM mdame.topics o
                 JOIN mdame.safety_audit_logs s
                   ON s.subject_kind = 'topic' AND s.subject_key = %s
                WHERE o.trend_id = %s""",
            [injected[0].idempotency_key, injected[0].id],
        ).fetchall()
    [(verdict, rule, reasons, state)] = rows
    assert (verdict, rule, state) == ("block", "prompt_firewall", "rejected")
    assert any("ignore previous instructions" in r for r in reasons)


def test_the_youtube_key_is_never_logged_stored_or_raised(
    live: Any,
    fake: FeedServer,
    marker: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    caplog.set_level(logging.DEBUG)  # every logger, httpx's request lines included
    _dimension(live, tmp_path, _sources(fake))
    fake.faults.push("youtube", "500")  # the first YouTube source fails: the error path
    ok = _run(live)
    fake.set_fault("*", "500")  # then every source fails: the stage's exception
    failed = _run(live)

    assert ok.success and not failed.success
    sent = [r.query.get("key") for r in fake.requests_to("/youtube/")]
    assert sent and all(k == [marker] for k in sent), "the marker key was really used"

    haystacks = {"python logs": caplog.text}
    out, err = capfd.readouterr()
    haystacks["stdout/stderr"] = out + err
    for result in (ok, failed):
        records = live.instance.all_logs(result.run_id)
        haystacks[f"dagster event log {result.run_id}"] = "\n".join(
            serialize_value(r) for r in records
        )
        haystacks[f"run {result.run_id}"] = serialize_value(
            live.instance.get_run_by_id(result.run_id)
        )
        haystacks[f"exceptions {result.run_id}"] = "\n".join(_failures(result))
    haystacks["run metadata"] = json.dumps(_metadata(ok), default=str)
    with admin_connect(live.state.url, autocommit=True) as conn:  # every column of every row
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'mdame'"
            ).fetchall()
        ]
        for table in tables:
            rows = conn.execute(f"SELECT t::text FROM mdame.{table} t").fetchall()
            haystacks[f"table mdame.{table}"] = "\n".join(r[0] for r in rows)
    haystacks["dagster storage files"] = "\n".join(
        p.read_text(errors="replace")
        for p in Path(live.instance.root_directory).rglob("*")
        if p.is_file() and p.stat().st_size < 5_000_000
    )

    # The failure really is in what was searched: these are not empty haystacks.
    assert "HTTP 500 Internal Server Error" in haystacks["table mdame.events"]
    assert "every trend source failed" in haystacks[f"exceptions {failed.run_id}"]
    # httpx logs warnings only; the stage's own lines still name the key's API requests.
    assert "/youtube/v3/videos?part=" in haystacks["python logs"]
    leaked = [name for name, text in haystacks.items() if marker in text]
    assert leaked == []


def test_the_youtube_key_is_an_env_var_in_the_definitions() -> None:
    value = production_providers()["trend_source"].__dict__.get("youtube_api_key")
    assert isinstance(value, dg.EnvVar) and value.env_var_name == "YOUTUBE_API_KEY"
