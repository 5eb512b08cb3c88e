"""The local stock servers (fakes/pexels.py, fakes/pixabay.py) speak their APIs: Pexels'
filters and pages, Pixabay's sizes and its limits on a request, the rate headers in each one's
form, files that are the MP4s their answers describe (showing the subject, or on purpose
another one), the controls over HTTP, and counters that survive a restart. httpx on
127.0.0.1."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from fakes import imagery, pexels, pixabay
from fakes.pexels import FakePexels
from fakes.pixabay import FakePixabay
from mdame_domain.probe import probe_media


@pytest.fixture
def px(tmp_path: Path) -> Iterator[FakePexels]:
    with pexels.running(tmp_path / "pexels") as server:
        yield server


@pytest.fixture
def pb(tmp_path: Path) -> Iterator[FakePixabay]:
    with pixabay.running(tmp_path / "pixabay") as server:
        yield server


def _pexels(px: FakePexels, **params: object) -> httpx.Response:
    return httpx.get(
        px.base_url + "videos/search", params=params, headers={"Authorization": "k"}, timeout=30
    )


def test_pexels_filters_pages_and_says_its_rate_window_as_a_unix_time(px: FakePexels) -> None:
    px.off_topic_first = True
    before = time.time()
    everything = _pexels(px, query="telescope night")
    assert everything.status_code == 200
    reset = int(everything.headers["X-Ratelimit-Reset"])
    assert math.ceil(before + 3600) <= reset <= math.ceil(time.time() + 3600)
    assert everything.headers["X-Ratelimit-Remaining"] == "199"
    videos = everything.json()["videos"]
    assert [v["user"]["name"] != "" for v in videos] == [True] * 6
    assert "accordion" in videos[0]["url"]  # the off-topic footage first, as asked
    portrait = _pexels(px, query="telescope night", orientation="portrait", per_page=2).json()
    assert portrait["total_results"] == 4 and len(portrait["videos"]) == 2
    assert all(v["height"] > v["width"] for v in portrait["videos"]) and "next_page" in portrait
    assert (
        _pexels(px, query="telescope", size="medium", min_duration=7).json()["total_results"] == 3
    )
    # A query with nothing a camera shows finds nothing; a missing one is refused.
    assert _pexels(px, query="about this").json()["videos"] == []
    assert _pexels(px).status_code == 400
    refused = httpx.get(px.base_url + "v1/videos/search", params={"query": "telescope"})
    assert refused.status_code == 401 and "error" in refused.json()


def test_pixabay_answers_its_four_sizes_and_refuses_as_pixabay_does(pb: FakePixabay) -> None:
    answer = httpx.get(
        pb.base_url + "api/videos/", params={"key": "k", "q": "telescope", "per_page": 3}
    )
    assert answer.headers["X-Ratelimit-Reset"] == "60"
    assert answer.headers["X-Ratelimit-Remaining"] == "99"
    hits = answer.json()["hits"]
    assert len(hits) == 3 and answer.json()["totalHits"] == 6
    assert hits[0]["videos"]["large"] == {
        "url": "",
        "width": 0,
        "height": 0,
        "size": 0,
        "thumbnail": "",
    }
    assert [hits[0]["videos"][s]["width"] for s in ("medium", "small", "tiny")] == [1920, 1280, 960]
    for params, words in [
        ({"q": "telescope"}, '"key" is wrong or missing'),
        ({"key": "k", "q": "telescope", "per_page": 2}, '"per_page" is out of valid range'),
        ({"key": "k", "q": "x" * 101}, '"q" exceeds'),
    ]:
        refused = httpx.get(pb.base_url + "api/videos/", params=params)
        assert refused.status_code == 400 and words in refused.text
        assert refused.headers["Content-Type"].startswith("text/plain")
    assert "k" not in {r["path"] for r in pb.requests()}, "the key is not kept"


def _keyframe(data: bytes) -> bytes:
    return imagery._ffmpeg(
        ["-i", "pipe:0", "-frames:v", "1", "-f", "image2pipe", "-vcodec", "mjpeg", "-"],
        stdin=data,
    )


def test_the_files_are_the_mp4s_described_showing_the_subject_or_another_word(
    px: FakePexels, tmp_path: Path
) -> None:
    px.off_topic_first = False
    videos = _pexels(px, query="telescope", orientation="portrait").json()["videos"]
    for video in (videos[2], videos[3]):  # the on-topic one, then the off-topic one
        small = video["video_files"][-1]
        got = httpx.get(small["link"], timeout=60)
        assert got.headers["Content-Type"] == "video/mp4"
        path = tmp_path / f"{video['id']}.mp4"
        path.write_bytes(got.content)
        probe = probe_media(str(path))
        assert (probe.width, probe.height) == (small["width"], small["height"])
        assert probe.duration_s == pytest.approx(video["duration"], abs=0.05)
        assert probe.fps == small["fps"] and probe.audio_codec is None
        score, _ = imagery.judge([_keyframe(got.content)], "a telescope at night")
        on_topic = "telescope" in video["url"]
        assert score == (imagery.ON_TOPIC_SCORE if on_topic else imagery.OFF_TOPIC_SCORE)


def test_faults_and_knobs_over_http_and_counters_that_survive_a_restart(px: FakePexels) -> None:
    with httpx.Client(base_url=px.base_url, timeout=30) as http:
        http.post("/_fake/config", json={"keys": ["good"], "limits": {"rate_limit": 1}})
        http.post("/_fake/faults", json={"fault": "server_error", "on": "search", "status": 503})
        search = {"query": "telescope"}
        assert (
            http.get("/videos/search", params=search, headers={"Authorization": "good"}).status_code
            == 503
        )
        assert (
            http.get("/videos/search", params=search, headers={"Authorization": "bad"}).status_code
            == 401
        )
        assert (
            http.get("/videos/search", params=search, headers={"Authorization": "good"}).status_code
            == 200
        )
        limited = http.get("/videos/search", params=search, headers={"Authorization": "good"})
        assert limited.status_code == 429 and limited.headers["X-Ratelimit-Remaining"] == "0"
        counted = http.get("/_fake/counters").json()
    assert counted == {
        "search": 4,
        "file": 0,
        "by_status": {"503": 1, "401": 1, "200": 1, "429": 1},
    }
    px.restart()
    assert px.counters() == counted and px.rate_limit == 1
    with pytest.raises(ValueError, match="unknown fault"):
        px.faults.push("teapot")
