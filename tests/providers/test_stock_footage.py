"""The stock footage provider (mdame_resources/providers/stock.py) with its real httpx client
against the local Pexels and Pixabay servers (fakes/pexels.py, fakes/pixabay.py): a scene's
clip searched, filtered, downloaded, cropped to 9:16 and trimmed to its span; rate limits
honoured from the headers (a wait, then healed); a refused key permanent and named, never
shown; Pixabay when Pexels has nothing; downloads refused for their size, type or scheme.

The servers' clock is the test's and so is the client's: a rate window passes without a sleep.
Clips are made at the tiny media profile (108x192)."""

from __future__ import annotations

import dataclasses
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fakes import imagery, pexels, pixabay, stock_common
from fakes.pexels import FakePexels
from fakes.pixabay import FakePixabay
from mdame_core.settings import REPO_ROOT, SettingsError
from mdame_domain.probe import probe_media
from mdame_domain.waits import NotYet
from mdame_resources.providers.stock import (
    DownloadRefused,
    NoStockFootage,
    StockClient,
    StockClip,
    StockFootage,
    StockRefused,
    StockSettings,
    StockUnavailable,
)

PEXELS_KEY = "pexelsKEYsecret0123456789"
PIXABAY_KEY = "pixabayKEYsecret0123456789"
NARRATION = "Astronomers point a telescope at the night sky."
QUERIES = ["telescope night", "telescope"]  # search_queries(NARRATION) and a broader one
SPAN = 1.5
SETTINGS = StockSettings(backoff_s=0.01, cache_dir=None)


class Clock:
    """The servers' and the client's time, moved on by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture(autouse=True)
def tiny_profile(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDAME_MEDIA_PROFILE", "tiny")


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def px(tmp_path: Path, clock: Clock) -> Iterator[FakePexels]:
    with pexels.running(tmp_path / "pexels") as server:
        server.clock = clock
        server.off_topic_first = False
        yield server


@pytest.fixture
def pb(tmp_path: Path, clock: Clock) -> Iterator[FakePixabay]:
    with pixabay.running(tmp_path / "pixabay") as server:
        server.clock = clock
        server.off_topic_first = False
        yield server


def _client(
    clock: Clock,
    px: FakePexels | None = None,
    pb: FakePixabay | None = None,
    settings: StockSettings = SETTINGS,
    pexels_key: str = PEXELS_KEY,
    pixabay_key: str = PIXABAY_KEY,
) -> StockClient:
    keys = {"pexels": pexels_key if px else "", "pixabay": pixabay_key if pb else ""}
    urls = {"pexels": px.base_url if px else "", "pixabay": pb.base_url if pb else ""}
    return StockClient(keys, urls, settings, clock=clock)


def _keyframe(path: Path) -> bytes:
    return subprocess.run(
        ["ffmpeg", "-hide_banner", "-loglevel", "error", "-ss", "0.5", "-i", str(path),
         "-frames:v", "1", "-f", "image2pipe", "-vcodec", "mjpeg", "-"],
        capture_output=True, check=True, timeout=60,
    ).stdout  # fmt: skip


def _gate(narration: str) -> Callable[[StockClip], bool]:
    """A relevance gate for the test: the fake image judge on one keyframe."""

    def accept(clip: StockClip) -> bool:
        return imagery.judge([_keyframe(clip.path)], narration)[0] >= 0.5

    return accept


def _searches(server: FakePexels | FakePixabay) -> int:
    return int(server.counters()["search"])


def test_a_scene_gets_on_topic_footage_cropped_to_9_16_for_its_exact_span(
    px: FakePexels, clock: Clock, tmp_path: Path
) -> None:
    px.off_topic_first = True  # the first result shows something else: the gate turns it down
    out = tmp_path / "scene_1.mp4"
    with _client(clock, px) as client:
        found = client.clip_for_scene(QUERIES, SPAN, out, accept=_gate(NARRATION))
    clip = found.clip
    probe = probe_media(str(out))
    assert (probe.width, probe.height, probe.video_codec, probe.audio_codec) == (
        108,
        192,
        "h264",
        None,
    )
    assert probe.duration_s == pytest.approx(SPAN, abs=0.5 / 24) and probe.fps == 24.0
    assert imagery.judge([_keyframe(out)], NARRATION)[0] == imagery.ON_TOPIC_SCORE
    # The off-topic video was downloaded and turned down; the too short and too small ones
    # were never downloaded; the on-topic one's smallest file that covers 108x192 was.
    off = px.catalogue(QUERIES[0])[0].word
    assert [t["outcome"] for t in found.tried] == ["turned down"]
    assert {r.reason.split(":")[0] for r in found.rejected} == {"too short", "too small"}
    record = clip.provenance()
    assert record["source"] == "pexels" and "telescope" in record["page_url"]
    assert off not in record["page_url"] and record["width"] == 360 and record["height"] == 640
    assert record["start_s"] == pytest.approx((7 - SPAN) / 2) and record["duration_s"] == SPAN
    assert (
        clip.attribution()
        == f"Video by {clip.candidate.author} on Pexels: {clip.candidate.page_url}"
    )
    # One search (the first query had candidates enough), two files; Pixabay not configured.
    assert px.counters() == {"search": 1, "file": 2, "by_status": {"200": 3}}
    seen = px.requests()[0]
    assert seen["query"] == QUERIES[0] and seen["path"] == "/videos/search"
    assert not list(tmp_path.glob(".*download")), "the download is removed"


def test_pixabay_is_searched_when_pexels_has_nothing(
    px: FakePexels, pb: FakePixabay, clock: Clock, tmp_path: Path
) -> None:
    px.empty = True
    with _client(clock, px, pb) as client:
        found = client.clip_for_scene(QUERIES, SPAN, tmp_path / "scene.mp4", _gate(NARRATION))
    assert found.clip.candidate.source == "pixabay" and found.tried == []
    assert (
        found.clip.attribution().startswith("Video by ")
        and " on Pixabay: " in found.clip.attribution()
    )
    # Each Pexels query first, then Pixabay's first.
    assert (_searches(px), _searches(pb)) == (2, 1)
    assert probe_media(str(found.clip.path)).height == 192


def test_a_429_burst_makes_the_scene_wait_until_the_reset_then_heals(
    px: FakePexels, clock: Clock, tmp_path: Path
) -> None:
    for _ in range(2):
        px.faults.push("rate_limited", reset=120)
    out = tmp_path / "scene.mp4"
    with _client(clock, px) as client:
        for _ in range(2):
            reset = datetime.fromtimestamp(math.ceil(clock.now + 120), UTC)
            with pytest.raises(NotYet) as waited:
                client.clip_for_scene(QUERIES, SPAN, out)
            assert waited.value.until == reset
            assert "Pexels rate limit" in str(waited.value)
            sent = _searches(px)
            # Before the reset nothing is sent: the client knows it would be refused.
            with pytest.raises(NotYet):
                client.clip_for_scene(QUERIES, SPAN, out)
            assert _searches(px) == sent
            clock.advance(121)
        found = client.clip_for_scene(QUERIES, SPAN, out)
    assert found.clip.candidate.source == "pexels" and out.exists()
    assert px.counters()["by_status"] == {"429": 2, "200": 2}


def test_pixabays_reset_is_in_seconds_and_a_bare_429_waits_for_the_last_announced_reset(
    px: FakePexels, pb: FakePixabay, clock: Clock, tmp_path: Path
) -> None:
    pb.faults.push("rate_limited", reset=30)
    with _client(clock, pb=pb) as client, pytest.raises(NotYet) as waited:
        client.clip_for_scene(QUERIES, SPAN, tmp_path / "a.mp4")
    assert waited.value.until == datetime.fromtimestamp(clock.now, UTC) + timedelta(seconds=30)
    # Pexels may answer a 429 without its headers: the reset the last 2xx announced holds.
    px.set_limits(rate_window=600)
    with _client(clock, px) as client:
        client.search("pexels", "telescope")
        window_end = datetime.fromtimestamp(math.ceil(clock.now + 600), UTC)
        px.faults.push("rate_limited", headers=False)
        with pytest.raises(NotYet) as waited:
            client.search("pexels", "galaxy")
    assert waited.value.until == window_end


def test_no_remaining_request_waits_too_and_the_other_source_serves_meanwhile(
    px: FakePexels, pb: FakePixabay, clock: Clock, tmp_path: Path
) -> None:
    px.set_limits(rate_limit=1, rate_window=600)
    with _client(clock, px, pb) as client:
        first = client.clip_for_scene(QUERIES, SPAN, tmp_path / "1.mp4")
        # Remaining 0: the next Pexels search is not sent; Pixabay's answer serves the scene.
        second = client.clip_for_scene(["galaxy stars"], SPAN, tmp_path / "2.mp4")
    assert first.clip.candidate.source == "pexels"
    assert second.clip.candidate.source == "pixabay"
    assert (_searches(px), _searches(pb)) == (1, 1)


def test_a_refused_key_is_permanent_names_its_variable_and_never_shows_the_key(
    px: FakePexels, pb: FakePixabay, clock: Clock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    caplog.set_level(logging.INFO, logger="httpx")  # an operator debugging: still redacted
    px.keys, pb.keys = {"another-key"}, {PIXABAY_KEY}
    texts = []
    with _client(clock, px, pb) as client, pytest.raises(StockRefused) as refused:
        client.clip_for_scene(QUERIES, SPAN, tmp_path / "scene.mp4")
    assert refused.value.variable == "MDAME_PEXELS_API_KEY" and not refused.value.allow_retries
    assert "Your API key is invalid or missing" in str(refused.value)  # Pexels' own words
    texts.append(str(refused.value))
    pb.keys = {"another-key"}
    with _client(clock, pb=pb) as client:
        with pytest.raises(StockRefused) as refused:
            client.clip_for_scene(QUERIES, SPAN, tmp_path / "scene.mp4")
        assert refused.value.variable == "MDAME_PIXABAY_API_KEY"
        assert '"key" is wrong or missing' in str(refused.value)
        texts.append(str(refused.value))
        # A transient failure's and a wait's texts, and a success's log, carry no key either.
        pb.keys = None
        for _ in range(3):
            pb.faults.push("server_error", on="search", status=503)
        with pytest.raises(StockUnavailable) as failed:
            client.clip_for_scene(QUERIES, SPAN, tmp_path / "scene.mp4")
        texts.append(str(failed.value))
        pb.faults.push("rate_limited")
        with pytest.raises(NotYet) as waited:
            client.clip_for_scene(QUERIES, SPAN, tmp_path / "scene.mp4")
        texts.append(str(waited.value))
    clock.advance(61)
    with _client(clock, pb=pb) as client:
        client.clip_for_scene(QUERIES, SPAN, tmp_path / "scene.mp4")
    assert "HTTP Request" in caplog.text  # httpx's lines were on, with Pixabay's URLs
    for text in [*texts, caplog.text]:
        assert PEXELS_KEY not in text and PIXABAY_KEY not in text


def test_downloads_over_the_cap_or_of_another_type_or_scheme_are_refused(
    px: FakePexels, clock: Clock, tmp_path: Path
) -> None:
    settings = dataclasses.replace(SETTINGS, max_bytes=1024 * 1024)
    out = tmp_path / "clips" / "scene.mp4"
    with _client(clock, px, settings=settings) as client:
        stream = client.candidates(QUERIES, client.need(SPAN))
        candidate = next(iter(stream))
        for fault, options, why in [
            ("oversize", {"bytes": 2 * 1024 * 1024}, "over the 1048576-byte cap"),
            ("oversize", {"bytes": 2 * 1024 * 1024, "chunked": True}, "over the 1048576-byte cap"),
            ("wrong_type", {}, "text/html, not video/mp4"),
            ("oversize", {"bytes": 1000}, "not an MP4 file"),  # said video/mp4, sent zeros
        ]:
            px.faults.push(fault, **options)
            with pytest.raises(DownloadRefused, match=why):
                client.fetch(candidate, out, SPAN)
            assert not list(out.parent.iterdir()), "nothing is left of a refused file"
        elsewhere = dataclasses.replace(candidate, url="http://cdn.example.com/v.mp4")
        with pytest.raises(DownloadRefused, match="not an https URL"):
            client.fetch(elsewhere, out, SPAN)
        # In a scene, a refused file is noted and the next candidate used.
        px.faults.push("wrong_type")
        found = client.clip_for_scene(QUERIES, SPAN, out)
    assert [t["outcome"] for t in found.tried] == ["refused"]
    assert found.clip.candidate.key != found.tried[0]["key"] and out.exists()


def test_5xx_drops_and_cut_files_are_tried_again_then_the_run_gives_up_transiently(
    px: FakePexels, clock: Clock, tmp_path: Path
) -> None:
    px.faults.push("server_error", on="search", status=502)
    px.faults.push("drop", on="search")
    px.faults.push("truncate")
    out = tmp_path / "scene.mp4"
    with _client(clock, px) as client:
        found = client.clip_for_scene(QUERIES, SPAN, out)
        assert found.clip.candidate.source == "pexels"
        assert px.counters()["by_status"] == {"502": 1, "0": 2, "200": 2}
        for _ in range(3):
            px.faults.push("server_error", on="search")
        with pytest.raises(StockUnavailable, match="HTTP 500, 3 tries"):
            client.clip_for_scene(["galaxy"], SPAN, out)


def test_nothing_usable_is_no_footage_not_a_wait(
    px: FakePexels, clock: Clock, tmp_path: Path
) -> None:
    with _client(clock, px) as client, pytest.raises(NoStockFootage) as none:
        client.clip_for_scene(QUERIES, SPAN, tmp_path / "scene.mp4", accept=lambda clip: False)
    assert [t["outcome"] for t in none.value.tried] == ["turned down", "turned down"]
    assert "telescope night" in str(none.value)


def test_search_answers_are_cached_across_runs_for_their_ttl(
    px: FakePexels, clock: Clock, tmp_path: Path
) -> None:
    settings = dataclasses.replace(SETTINGS, cache_dir=tmp_path / "cache")
    for _ in range(2):  # two runs, two clients
        with _client(clock, px, settings=settings) as client:
            assert client.search("pexels", "Telescope  night")
    assert _searches(px) == 1
    [cached] = (tmp_path / "cache").iterdir()
    assert PEXELS_KEY not in cached.read_text()
    old = time.time() - settings.cache_s - 1
    os.utime(cached, (old, old))
    with _client(clock, px, settings=settings) as client:
        client.search("pexels", "telescope night")
    assert _searches(px) == 2


def test_the_resource_reads_its_keys_and_endpoints_and_prod_wants_https(
    px: FakePexels, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("MDAME_PEXELS_API_KEY", raising=False)
    monkeypatch.delenv("MDAME_PIXABAY_API_KEY", raising=False)
    with pytest.raises(StockRefused, match="MDAME_PEXELS_API_KEY and/or MDAME_PIXABAY_API_KEY"):
        StockFootage().client()
    monkeypatch.setenv("MDAME_PEXELS_API_KEY", PEXELS_KEY)
    for name, value in stock_common.environ_for(px).items():
        monkeypatch.setenv(name, value)  # MDAME_PEXELS_URL
    monkeypatch.setenv("MDAME_STOCK_CACHE_DIR", str(tmp_path / "cache"))
    with StockFootage().client() as client:
        assert client.sources == ["pexels"] and client.search("pexels", "telescope")
    monkeypatch.setenv("ENV", "prod")
    with pytest.raises(SettingsError, match="MDAME_PEXELS_URL"):
        StockFootage().client()


def test_the_servers_run_standalone() -> None:
    for module in ("fakes.pexels", "fakes.pixabay"):
        done = subprocess.run(
            [sys.executable, "-m", module, "--help"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        assert "--rate-limit" in done.stdout and "--key" in done.stdout
