"""Video metadata is validated before any upload, each error naming the field."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import pytest

from mdame_domain.video_metadata import (
    VideoMetadata,
    VideoMetadataError,
    full_description,
    publication_marker,
    tags_length,
    validate,
    video_resource,
)

OK = VideoMetadata(title="Chips get faster", description="What changed.", tags=("ai", "chips"))
MARKER = publication_marker("a" * 64)


def _field(meta: VideoMetadata) -> str:
    with pytest.raises(VideoMetadataError) as err:
        validate(meta, MARKER)
    assert err.value.field in str(err.value)
    return err.value.field


def test_a_valid_video_resource_carries_the_disclosures_and_the_marker() -> None:
    body = video_resource(OK, MARKER)
    assert body["status"] == {
        "privacyStatus": "private",
        "selfDeclaredMadeForKids": False,
        "containsSyntheticMedia": True,
    }
    assert MARKER in body["snippet"]["description"]
    assert body["snippet"]["tags"] == ["ai", "chips"]
    assert body["snippet"]["categoryId"] == "28"


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"title": "x" * 101}, "title"),
        ({"title": "a <b>"}, "title"),
        ({"title": "  "}, "title"),
        ({"description": "é" * 2500}, "description"),  # 5,000 bytes + marker
        ({"description": "<script>"}, "description"),
        ({"tags": ("x" * 250, "y" * 250)}, "tags"),
        ({"tags": ("a,b",)}, "tags"),
        ({"category_id": "99"}, "categoryId"),
        ({"default_language": "English"}, "defaultLanguage"),
        ({"privacy_status": "secret"}, "privacyStatus"),
        ({"privacy_status": "public", "publish_at": datetime(2027, 1, 1, tzinfo=UTC)}, "publishAt"),
        ({"publish_at": datetime(2027, 1, 1)}, "publishAt"),
        ({"self_declared_made_for_kids": "no"}, "selfDeclaredMadeForKids"),
        ({"contains_synthetic_media": 1}, "containsSyntheticMedia"),
        ({"notify_subscribers": None}, "notifySubscribers"),
    ],
)
def test_each_bad_field_is_named(change: dict, field: str) -> None:
    assert _field(replace(OK, **change)) == field


def test_hashtags_count_towards_the_description_bytes() -> None:
    base = replace(OK, description="d" * (5000 - len(f"\n\n[{MARKER}]")))
    validate(base, MARKER)  # exactly 5,000 bytes
    assert _field(replace(base, hashtags=("shorts",))) == "description"
    assert "#shorts" in full_description(replace(OK, hashtags=("shorts",)), MARKER)


def test_tags_count_quotes_and_commas_like_youtube() -> None:
    assert tags_length(("a b", "c")) == 5 + 1 + 1
    validate(replace(OK, tags=("x" * 500,)), MARKER)
    assert _field(replace(OK, tags=("x" * 499, "y"))) == "tags"


def test_publish_at_with_private_is_sent() -> None:
    when = datetime(2027, 1, 1, 9, tzinfo=UTC)
    body = video_resource(replace(OK, publish_at=when), MARKER)
    assert body["status"]["publishAt"] == when.isoformat()
