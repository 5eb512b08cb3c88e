"""Stock footage, the plain part (mdame_domain/stock.py and scenes.search_queries): reading
Pexels' and Pixabay's answers, which results can cover a scene and in which order, the rate-limit
headers and the answers' classes, the crop-and-trim command (run on a real clip), the credit
line, and the scene planner's search terms."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fakes import imagery
from mdame_domain.probe import probe_media
from mdame_domain.scenes import search_queries
from mdame_domain.stock import (
    PEXELS,
    PIXABAY,
    StockFile,
    StockNeed,
    StockVideo,
    answer_class,
    attribution_line,
    attribution_lines,
    choose_file,
    clip_args,
    crop_size,
    parse_pexels,
    parse_pixabay,
    rate_remaining,
    rate_reset,
    select,
    trim_start,
    wait_until,
)

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NEED = StockNeed(span_s=3.0, min_width=360, min_height=640)

PEXELS_BODY = {
    "page": 1,
    "per_page": 15,
    "total_results": 2,
    "videos": [
        {
            "id": 101,
            "width": 1080,
            "height": 1920,
            "duration": 7,
            "url": "https://www.pexels.com/video/telescope-101/",
            "user": {"id": 5, "name": "Ana Lima", "url": "https://www.pexels.com/@ana"},
            "video_files": [
                {"quality": "hd", "file_type": "video/mp4", "width": 1080, "height": 1920,
                 "fps": 29.97, "link": "https://videos.pexels.com/101-hd.mp4"},
                {"quality": "sd", "file_type": "video/mp4", "width": 360, "height": 640,
                 "fps": 29.97, "link": "https://videos.pexels.com/101-sd.mp4"},
                {"quality": "hls", "file_type": "video/mp4", "width": None, "height": None,
                 "fps": None, "link": "https://videos.pexels.com/101.m3u8"},
            ],
            "video_pictures": [],
        },
        {"id": None, "video_files": []},
    ],
}  # fmt: skip
PIXABAY_BODY = {
    "total": 1,
    "totalHits": 1,
    "hits": [
        {
            "id": 202,
            "pageURL": "https://pixabay.com/videos/galaxy-202/",
            "duration": 12,
            "user": "Jonas",
            "user_id": 77,
            "videos": {
                "large": {"url": "", "width": 0, "height": 0, "size": 0},
                "medium": {"url": "https://cdn.pixabay.com/202_m.mp4", "width": 1920,
                           "height": 1080, "size": 9_000_000},
                "small": {"url": "https://cdn.pixabay.com/202_s.mp4", "width": 1280,
                          "height": 720, "size": 4_000_000},
                "tiny": {"url": "https://cdn.pixabay.com/202_t.mp4", "width": 960,
                         "height": 540, "size": 2_000_000},
            },
        }
    ],
}  # fmt: skip


def _video(key: int, width: int, height: int, seconds: float = 8.0, **file: object) -> StockVideo:
    files = (StockFile(f"https://x/{key}.mp4", width, height, **file),)  # type: ignore[arg-type]
    return StockVideo(PEXELS, str(key), f"https://p/{key}", "A", "", seconds, width, height, files)


def test_each_sources_answer_is_read_into_videos_with_their_renditions() -> None:
    [pexels] = parse_pexels(PEXELS_BODY, "telescope")
    assert (pexels.key, pexels.author, pexels.duration_s, pexels.query) == (
        "pexels:101",
        "Ana Lima",
        7.0,
        "telescope",
    )
    assert [f.width for f in pexels.files] == [1080, 360, 0]
    [pixabay] = parse_pixabay(PIXABAY_BODY)
    # The absent 4K size is no rendition; the profile URL is built from the user and its id.
    assert [f.width for f in pixabay.files] == [1920, 1280, 960]
    assert pixabay.author_url == "https://pixabay.com/users/Jonas-77/"
    assert (pixabay.width, pixabay.height, pixabay.files[0].size) == (1920, 1080, 9_000_000)


def test_the_smallest_rendition_whose_crop_covers_the_clip_is_chosen() -> None:
    [pexels] = parse_pexels(PEXELS_BODY)
    chosen = choose_file(pexels, NEED)
    assert isinstance(chosen, StockFile) and chosen.url.endswith("101-sd.mp4")
    [pixabay] = parse_pixabay(PIXABAY_BODY)
    # 960x540 crops to 303x540 and 1280x720 to 405x720: the small size is the least that covers.
    assert crop_size(960, 540) == (303, 540) and crop_size(1280, 720) == (405, 720)
    chosen = choose_file(pixabay, NEED)
    assert isinstance(chosen, StockFile) and chosen.width == 1280
    # A cap the source's sizes say it would break leaves the small size out; none fits: why.
    capped = choose_file(pixabay, StockNeed(3.0, 360, 640, max_bytes=5_000_000))
    assert isinstance(capped, StockFile) and capped.width == 1280
    assert "cap" in str(choose_file(pixabay, StockNeed(3.0, 360, 640, max_bytes=1_000)))


def test_the_filter_keeps_what_covers_the_span_and_the_size_and_ranks_portrait_first() -> None:
    videos = [
        _video(1, 1920, 1080),  # landscape, croppable: 607x1080
        _video(2, 1080, 1920, seconds=2.0),  # too short for 3 s
        _video(3, 180, 320),  # too small
        _video(4, 720, 1280),  # portrait
        _video(5, 1080, 1920, file_type="video/webm"),  # no MP4
        _video(4, 720, 1280),  # a duplicate: offered once
        _video(6, 1920, 1080),
    ]
    chosen = select(videos, NEED)
    assert [c.id for c in chosen.candidates] == ["4", "1", "6"]
    assert {r.key: r.reason.split(":")[0] for r in chosen.rejected} == {
        "pexels:2": "too short",
        "pexels:3": "too small",
        "pexels:5": "no MP4 file",
    }
    no_landscape = select(videos, StockNeed(3.0, 360, 640, allow_landscape=False))
    assert [c.id for c in no_landscape.candidates] == ["4"]
    # Keys another query already offered are not offered again.
    seen = {"pexels:4"}
    assert [c.id for c in select(videos, NEED, seen).candidates] == ["1", "6"]


def test_the_span_is_taken_from_the_middle_of_the_footage() -> None:
    assert trim_start(8.0, 3.0) == 2.5
    assert trim_start(3.0, 3.0) == 0.0
    assert trim_start(7.0, 1.5) == 2.75


def test_the_clip_command_crops_to_9_16_and_trims_to_the_exact_span(tmp_path: Path) -> None:
    source = tmp_path / "landscape.mp4"
    source.write_bytes(imagery.footage_mp4("telescope", 256, 144, 3.0))
    out = tmp_path / "clip.mp4"
    subprocess.run(clip_args(str(source), str(out), 0.5, 1.25, 108, 192), check=True, timeout=60)
    probe = probe_media(str(out))
    assert (probe.width, probe.height, probe.video_codec, probe.audio_codec) == (
        108,
        192,
        "h264",
        None,
    )
    assert probe.fps == 24.0 and probe.duration_s == pytest.approx(1.25, abs=0.5 / 24)
    with pytest.raises(ValueError):
        clip_args("a", "b", 0.0, 0.0, 108, 192)


def test_the_credit_names_the_author_the_source_and_the_page_once_each() -> None:
    assert attribution_line(PEXELS, "Ana Lima", "https://www.pexels.com/video/x-1/") == (
        "Video by Ana Lima on Pexels: https://www.pexels.com/video/x-1/"
    )
    assert attribution_line(PIXABAY, " ", "https://pixabay.com/videos/y-2/") == (
        "Video on Pixabay: https://pixabay.com/videos/y-2/"
    )
    record = {"source": PEXELS, "author": "Ana", "page_url": "https://p/1"}
    generated = {"source": "generated", "author": "", "page_url": ""}
    assert attribution_lines([record, generated, record]) == ["Video by Ana on Pexels: https://p/1"]


def test_rate_headers_say_until_when_a_source_waits() -> None:
    epoch = NOW + timedelta(minutes=30)
    pexels = {"X-Ratelimit-Remaining": "0", "X-Ratelimit-Reset": str(int(epoch.timestamp()))}
    pixabay = {"x-ratelimit-remaining": "41", "x-ratelimit-reset": "17"}
    assert rate_reset(pexels, NOW) == epoch  # a Unix time
    assert rate_reset(pixabay, NOW) == NOW + timedelta(seconds=17)  # seconds left
    assert rate_remaining(pexels) == 0 and rate_remaining({}) is None
    # A 429 waits for its reset; a bare 429 for the reset the last answer announced, else the
    # default; a 200 with nothing left waits too, one with some left does not.
    assert wait_until(429, pexels, NOW, 60) == epoch
    assert wait_until(429, {}, NOW, 60, last_reset=epoch) == epoch
    assert wait_until(429, {}, NOW, 60) == NOW + timedelta(seconds=60)
    assert wait_until(200, pexels, NOW, 60) == epoch
    assert wait_until(200, pixabay, NOW, 60) is None


def test_answers_are_classed_as_the_sources_send_them() -> None:
    assert answer_class(PEXELS, 200, "") == "ok"
    assert answer_class(PEXELS, 429, "") == "wait"
    assert answer_class(PIXABAY, 503, "") == "transient"
    assert answer_class(PEXELS, 401, '{"error": "bad"}') == "key"
    assert answer_class(PIXABAY, 400, '[ERROR 400] "key" is wrong or missing.') == "key"
    assert answer_class(PIXABAY, 400, '[ERROR 400] "per_page" is out of valid range.') == "refused"
    assert answer_class(PEXELS, 404, "") == "refused"


def test_search_queries_name_what_the_narration_says_in_its_order() -> None:
    assert search_queries("Researchers filmed honeybees in a lab.") == [
        "researchers honeybees",
        "lab",
    ]
    assert search_queries("The tokamak held plasma hotter than the sun's core.") == [
        "tokamak plasma",
        "hotter sun",
        "core",
    ]
    # One pair only: its head noun alone is the broader second search.
    assert search_queries("Keep an eye on how bees develops from here.") == ["eye bees", "bees"]
    # One word: the theme is the second; nothing to film: the theme alone; nothing at all: none.
    assert search_queries("Small changes add up to bigger shifts.", "space telescopes") == [
        "shifts",
        "space telescopes",
    ]
    assert search_queries("For now, the basics are worth knowing.", "space") == ["space"]
    assert search_queries("Follow for more, and tell us what you think.") == []
    # Deterministic, 2-3 queries, each a few words, within Pixabay's 100 characters.
    long = "Glaciers, volcanoes, canyons, deserts, rivers, forests and oceans shape coastlines."
    queries = search_queries(long)
    assert queries == search_queries(long) and len(queries) == 3
    assert all(len(q) <= 100 and len(q.split()) <= 2 for q in queries)
    # The fakes draw a query's first subject word: a narrated word, so on topic.
    for query in queries:
        assert imagery.depicted_word(query) in imagery.subject_words(long)
