"""The offline publishing channel: atomic, idempotent outbox entries."""

from __future__ import annotations

import hashlib
import json
import re

import pytest

from mdame_domain.outbox import (
    OutboxConflict,
    list_outbox,
    outbox_video_id,
    publish_to_outbox,
)

META = {"title": "Glass rain", "published_at": "2025-01-02T10:00:00Z", "tags": ["space"]}


@pytest.fixture
def video(tmp_path):
    path = tmp_path / "render.mp4"
    path.write_bytes(b"fake mp4 bytes")
    return path


def test_video_id_is_deterministic_and_youtube_shaped() -> None:
    video_id = outbox_video_id("script-key-1")
    assert video_id == outbox_video_id("script-key-1")
    assert video_id != outbox_video_id("script-key-2")
    assert re.fullmatch(r"[A-Za-z0-9_-]{11}", video_id)
    with pytest.raises(ValueError):
        outbox_video_id("")


def test_publish_writes_video_and_metadata(tmp_path, video) -> None:
    root = tmp_path / "outbox"
    entry = publish_to_outbox(root, "space-facts", "abcDEF12345", video, META)
    assert entry.folder == root / "space-facts" / "abcDEF12345"
    assert entry.video_path.read_bytes() == b"fake mp4 bytes"
    metadata = json.loads(entry.metadata_path.read_text())
    assert metadata == {
        **META,
        "video_id": "abcDEF12345",
        "sha256": hashlib.sha256(b"fake mp4 bytes").hexdigest(),
    }
    assert sorted(p.name for p in (root / "space-facts").iterdir()) == ["abcDEF12345"]


def test_publish_is_idempotent(tmp_path, video) -> None:
    root = tmp_path / "outbox"
    first = publish_to_outbox(root, "space-facts", "abcDEF12345", video, META)
    before = first.metadata_path.read_text()
    later = {**META, "published_at": "2025-01-03T10:00:00Z"}
    again = publish_to_outbox(root, "space-facts", "abcDEF12345", video, later)
    assert again == first
    assert first.metadata_path.read_text() == before


def test_different_content_under_the_same_id_conflicts(tmp_path, video) -> None:
    root = tmp_path / "outbox"
    publish_to_outbox(root, "space-facts", "abcDEF12345", video, META)
    other = tmp_path / "other.mp4"
    other.write_bytes(b"different bytes")
    with pytest.raises(OutboxConflict):
        publish_to_outbox(root, "space-facts", "abcDEF12345", other, META)


def test_crash_leftovers_are_ignored_and_do_not_block(tmp_path, video) -> None:
    root = tmp_path / "outbox"
    half = root / "space-facts" / ".tmp-abcDEF12345-crashed"
    half.mkdir(parents=True)
    (half / "video.mp4").write_bytes(b"half")
    assert list_outbox(root) == []
    entry = publish_to_outbox(root, "space-facts", "abcDEF12345", video, META)
    assert list_outbox(root) == [entry]


def test_list_outbox_orders_entries(tmp_path, video) -> None:
    root = tmp_path / "outbox"
    assert list_outbox(root) == []
    b = publish_to_outbox(root, "b-dim", "id2", video, META)
    a2 = publish_to_outbox(root, "a-dim", "id9", video, META)
    a1 = publish_to_outbox(root, "a-dim", "id1", video, META)
    assert list_outbox(root) == [a1, a2, b]


@pytest.mark.parametrize(
    ("slug", "video_id"), [("../x", "id"), ("dim", "a/b"), ("", "id"), ("dim", ".hidden")]
)
def test_unsafe_names_are_rejected(tmp_path, video, slug, video_id) -> None:
    with pytest.raises(ValueError):
        publish_to_outbox(tmp_path, slug, video_id, video, META)


def test_published_at_comes_from_the_caller(tmp_path, video) -> None:
    with pytest.raises(ValueError, match="published_at"):
        publish_to_outbox(tmp_path, "dim", "id1", video, {"title": "x"})
