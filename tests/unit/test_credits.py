"""The stock footage's credits, from the scenes' results to the published text: scene order,
each footage once, other engines ignored, and fitted to each platform's cap without losing the
credits Pexels asks for or cutting a link in half."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from mdame_domain.credits import Credit, credit_blocks, footage_credits, with_credits
from mdame_domain.tiktok import MAX_CAPTION_UNITS, caption
from mdame_domain.video_metadata import (
    INSTAGRAM_CAPTION,
    TIKTOK_CAPTION,
    VideoMetadata,
    full_description,
    marked_caption,
    publication_marker,
    validate,
    video_resource,
)

MARKER = publication_marker("c" * 64)


def stock(source: str, id_: str, author: str, page: str | None = None) -> dict[str, Any]:
    site = {"pexels": "https://www.pexels.com/video/", "pixabay": "https://pixabay.com/videos/"}
    return {
        "engine": "stock",
        "uri": f"media://{id_}",
        "source": {
            "source": source,
            "id": id_,
            "author": author,
            "page_url": page if page is not None else f"{site[source]}clip-{id_}/",
            "author_url": "https://www.pexels.com/@someone",
            "attribution": "ignored: the line is made again",
        },
    }


GENERATED = {"engine": "generated", "source": {"model": "gemini-2.5-flash-image", "still_uri": "m"}}
PROCEDURAL = {"engine": "procedural", "uri": "media://p"}


def test_credits_follow_scene_order_once_each_and_skip_other_engines() -> None:
    results = [
        stock("pixabay", "7", "Wave Maker"),
        GENERATED,
        stock("pexels", "11", "Ana Lima"),
        PROCEDURAL,
        None,
        stock("pixabay", "7", "Wave Maker"),  # the same footage in a later scene
        {"source": "pexels"},  # a source that is no provenance
        stock("pexels", "12", "Ana Lima"),  # another clip of the same author
    ]
    credits = footage_credits(results)
    assert [c.line() for c in credits] == [
        "Video by Wave Maker on Pixabay: https://pixabay.com/videos/clip-7/",
        "Video by Ana Lima on Pexels: https://www.pexels.com/video/clip-11/",
        "Video by Ana Lima on Pexels: https://www.pexels.com/video/clip-12/",
    ]
    assert [c.asked for c in credits] == [False, True, True]
    assert footage_credits([GENERATED, PROCEDURAL, {}]) == ()
    # Staged and read back, a credit is the same credit.
    assert tuple(Credit.from_provenance(c.to_json()) for c in credits) == credits


def test_author_names_and_links_from_a_source_are_published_safely() -> None:
    [credit] = footage_credits([stock("pexels", "1", "Ben <b>Ray</b> visit scam.com @ben\n")])
    assert credit.author == "Ben b Ray /b" and "<" not in credit.line()
    for page in (
        "https://evil.example/pexels.com/",
        "http://www.pexels.com/video/1/",
        "https://www.pexels.com.evil.example/video/1/",
        "https://www.pexels.com/video/1/ click",
    ):
        [credit] = footage_credits([stock("pexels", "1", "Ben", page)])
        assert credit.page_url == "" and credit.line() == "Video by Ben on Pexels", page
    [nameless] = footage_credits([stock("pixabay", "2", "  ")])
    assert nameless.line() == "Video on Pixabay: https://pixabay.com/videos/clip-2/"


def _credits() -> tuple[Credit, ...]:
    return footage_credits(
        [
            stock("pexels", "1", "Ana Lima"),
            stock("pixabay", "2", "Wave Maker"),
            stock("pexels", "3", "Ben Ray"),
            stock("pixabay", "4", "Cloud Nine"),
        ]
    )


def test_the_blocks_shorten_courtesy_credits_first_and_keep_every_asked_one() -> None:
    blocks = credit_blocks(_credits())
    assert blocks[0].count("\n") == 3 and "Cloud Nine" in blocks[0]
    assert "Cloud Nine" not in blocks[1] and "Wave Maker" in blocks[1]
    assert blocks[1].endswith("Also footage from Pixabay.")
    assert blocks[-1] == "Video by Ana Lima on Pexels\nVideo by Ben Ray on Pexels"
    for block in blocks:
        assert "Ana Lima" in block and "Ben Ray" in block  # Pexels asks for its credits
    assert [len(b) for b in blocks] == sorted((len(b) for b in blocks), reverse=True)
    # Only courtesy credits: they may all go.
    assert credit_blocks(_credits()[1::2])[-1] == ""


def test_with_credits_fits_a_cap_without_cutting_a_link() -> None:
    text = "The chip is faster. " * 20
    credits = _credits()
    full = with_credits(text, credits, "#ai", lambda t: True)
    assert full.startswith(text.strip()) and full.endswith("#ai")
    assert "Cloud Nine" in full
    for most in range(len(full), 0, -7):
        fitted = with_credits(text, credits, "#ai", lambda t, most=most: len(t) <= most)
        if len(fitted) > most:  # nothing but the asked credits, unlinked, and the hashtags
            assert fitted == "Video by Ana Lima on Pexels\nVideo by Ben Ray on Pexels\n\n#ai"
            continue
        assert "Ana Lima" in fitted and "Ben Ray" in fitted and fitted.endswith("#ai")
        for url in ("https://www.pexels.com/video/clip-1/", "https://pixabay.com/videos/clip-2/"):
            assert url in fitted or url[:-2] not in fitted  # a link is whole or gone
        if not fitted.startswith(text.strip()):  # the text gave way, at a word, for the links
            assert "Cloud Nine" not in fitted and "Wave Maker" not in fitted
            first = fitted.split("\n\n")[0]
            assert first.endswith("…") or first.startswith("Video by Ana Lima")
            # The links go only when they do not fit even without the text.
            linked = "https://www.pexels.com/video/clip-1/" in fitted
            assert linked or len(with_credits("", credits, "#ai", lambda t: True)) > most
    # Without credits, the text is left as it was for the caller's own limit.
    assert with_credits(text, (), "#ai", lambda t: False) == f"{text.strip()}\n\n#ai"


META = VideoMetadata(title="Chips get faster", description="What changed. " * 100, hashtags=("ai",))


def test_the_youtube_description_carries_the_credits_before_the_hashtags() -> None:
    meta = replace(META, credits=_credits())
    description = full_description(meta, MARKER)
    body, credits, hashtags, marker = description.rsplit("\n\n", 3)
    assert body == META.description.strip()
    assert credits.splitlines()[0] == (
        "Video by Ana Lima on Pexels: https://www.pexels.com/video/clip-1/"
    )
    assert (hashtags, marker) == ("#ai", f"[{MARKER}]")
    validate(meta, MARKER)
    # Without stock footage, the description is what it always was.
    assert full_description(META, MARKER) == f"{META.description.strip()}\n\n#ai\n\n[{MARKER}]"


def test_a_long_caption_keeps_the_asked_credits_whole() -> None:
    long = replace(META, description="Chips got faster again this week. " * 70)
    for cap in (TIKTOK_CAPTION, INSTAGRAM_CAPTION):
        meta = replace(long, credits=_credits(), caption=cap)
        body = video_resource(meta, MARKER)
        text = marked_caption(body, MARKER, cap.most, cap.length, cap.unit)
        assert cap.length(text) <= cap.most
        assert text.startswith(f"[{MARKER}] Chips get faster") and text.endswith("#ai")
        assert "Video by Ana Lima on Pexels: https://www.pexels.com/video/clip-1/" in text
        assert "Video by Ben Ray on Pexels: https://www.pexels.com/video/clip-3/" in text
        # The caption is the description as fitted: nothing more was cut from it.
        assert text.endswith(body["snippet"]["description"].replace(f"[{MARKER}]", "").strip())
    tiktok = caption(
        video_resource(replace(long, credits=_credits(), caption=TIKTOK_CAPTION), MARKER), MARKER
    )
    assert len(tiktok.encode("utf-16-le")) // 2 <= MAX_CAPTION_UNITS


def test_a_caption_cut_falls_between_words() -> None:
    body = {"snippet": {"title": "T", "description": "see https://www.pexels.com/video/x-1/ " * 80}}
    text = marked_caption(body, "mdame:k", 300)
    assert len(text) <= 300
    assert text.split()[-1] in ("see", "https://www.pexels.com/video/x-1/")  # never half a link
