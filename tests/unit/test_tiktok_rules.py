"""TikTok's chunk rules, caption and privacy, as mdame_domain.tiktok applies them."""

from __future__ import annotations

import pytest

from mdame_domain.tiktok import (
    MAX_CAPTION_UNITS,
    MAX_CHUNK,
    MAX_FINAL_CHUNK,
    MIB,
    MIN_CHUNK,
    TikTokRuleError,
    caption,
    chunk_plan,
    posted_id,
    privacy_level,
)


@pytest.mark.parametrize(
    ("size", "preferred", "chunk", "count"),
    [
        (1, 10 * MIB, 1, 1),  # under 5 MiB: whole
        (5 * MIB - 1, 10 * MIB, 5 * MIB - 1, 1),
        (7 * MIB, 10 * MIB, 7 * MIB, 1),  # under the preferred chunk: one chunk of its size
        (25 * MIB + 3, 10 * MIB, 10 * MIB, 2),  # the last chunk takes the remainder
        (100 * MIB, 1 * MIB, MIN_CHUNK, 20),  # a chunk is at least 5 MiB
        (300 * MIB, 500 * MIB, MAX_CHUNK, 4),  # and at most 64 MiB
        (20_000 * MIB, 10 * MIB, 20 * MIB, 1000),  # at most 1,000 chunks
        (20_000 * MIB + 7, 10 * MIB, 20 * MIB + 1, 999),
    ],
)
def test_chunk_plans_follow_the_media_transfer_rules(size, preferred, chunk, count) -> None:
    plan = chunk_plan(size, preferred)
    assert (plan.chunk_size, plan.count) == (chunk, count)
    assert plan.count == size // plan.chunk_size  # floor(video_size / chunk_size)
    assert 1 <= plan.count <= 1000
    final = size - plan.chunk_size * (plan.count - 1)
    assert final <= MAX_FINAL_CHUNK
    if size >= MIN_CHUNK:
        assert MIN_CHUNK <= plan.chunk_size <= MAX_CHUNK
    # Walking the plan covers the file once, in order.
    offset, spans = 0, []
    while offset < size:
        start, end = plan.chunk_at(offset)
        spans.append(end - start)
        offset = end
    assert len(spans) == plan.count and sum(spans) == size


def test_a_chunk_starts_only_where_the_plan_cuts() -> None:
    plan = chunk_plan(25 * MIB, 10 * MIB)
    assert plan.chunk_at(10 * MIB) == (10 * MIB, 25 * MIB)
    for bad in (-1, 3, 25 * MIB, 20 * MIB):
        with pytest.raises(TikTokRuleError):
            plan.chunk_at(bad)
    with pytest.raises(TikTokRuleError):
        chunk_plan(0)


BODY = {
    "snippet": {"title": "Chips get faster", "description": "What changed.\n\n#ai\n\n[mdame:k1]"},
    "status": {"privacyStatus": "private"},
}


def test_the_caption_leads_with_the_marker_and_keeps_to_the_limit() -> None:
    text = caption(BODY, "mdame:k1")
    assert text.startswith("[mdame:k1] Chips get faster")
    assert text.count("mdame:k1") == 1 and "#ai" in text
    long = {"snippet": {"title": "T", "description": "🎬" * 3000}}
    cut = caption(long, "mdame:k2")
    assert cut.startswith("[mdame:k2] T")
    assert len(cut.encode("utf-16-le")) // 2 <= MAX_CAPTION_UNITS  # an emoji is two units
    with pytest.raises(TikTokRuleError, match="UTF-16"):
        caption({"snippet": {"title": "x" * 2300}}, "mdame:k3")


def test_privacy_must_be_one_creator_info_allows() -> None:
    assert privacy_level(BODY, ["SELF_ONLY"]) == "SELF_ONLY"
    public = {**BODY, "status": {"privacyStatus": "public"}}
    assert privacy_level(public, ["PUBLIC_TO_EVERYONE", "SELF_ONLY"]) == "PUBLIC_TO_EVERYONE"
    with pytest.raises(TikTokRuleError, match="an unaudited TikTok app may only post privately"):
        privacy_level(public, ["SELF_ONLY"])
    with pytest.raises(TikTokRuleError, match="no TikTok equivalent"):
        privacy_level({"status": {"privacyStatus": "unlisted"}}, ["SELF_ONLY"])


def test_a_private_post_is_known_by_its_publish_id() -> None:
    assert posted_id({"status": "PUBLISH_COMPLETE"}, "v_pub_file~1") == "v_pub_file~1"
    done = {"status": "PUBLISH_COMPLETE", "publicaly_available_post_id": [7312345678901234567]}
    assert posted_id(done, "v_pub_file~1") == "7312345678901234567"
