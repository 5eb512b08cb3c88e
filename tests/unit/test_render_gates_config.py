"""Issue 11, slice "probe": the dimension's duration range, and the outbox publishing the
approved bytes only, with the render's thumbnail next to the video."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import pytest

from mdame_domain.dimensions import DimensionConfigError, dimension_from_json, parse_dimension
from mdame_domain.outbox import ContentMismatch, list_outbox, publish_to_outbox


def _data(**extra: Any) -> dict[str, Any]:
    return {
        "slug": "tech",
        "title": "Tech",
        "visual_style": "neon",
        "palette": ["#000000", "#ffffff"],
        "feeds": ["feeds/tech.xml"],
        "accounts": [{"platform": "youtube", "handle": "@tech"}],
        **extra,
    }


def test_duration_range_defaults_to_shorts_and_round_trips() -> None:
    config = parse_dimension(_data(), "tech.yaml")
    assert config.duration_range_s == (15.0, 180.0)
    custom = parse_dimension(_data(duration_range_s=[20, 59.5]), "tech.yaml")
    assert custom.duration_range_s == (20.0, 59.5)
    assert dimension_from_json(json.loads(json.dumps(custom.to_json()))) == custom
    stored_before = custom.to_json()
    del stored_before["duration_range_s"]
    assert dimension_from_json(stored_before).duration_range_s == (15.0, 180.0)


@pytest.mark.parametrize(
    "value", [[15], [15, 181], [30, 20], [0, 60], "15-60", [15, "60"], [True, 60]]
)
def test_bad_duration_ranges_name_the_field(value) -> None:
    with pytest.raises(DimensionConfigError, match="duration_range_s"):
        parse_dimension(_data(duration_range_s=value), "tech.yaml")


META = {"title": "Glass rain", "published_at": "2025-01-02T10:00:00Z"}


@pytest.fixture
def video(tmp_path: Path) -> Path:
    path = tmp_path / "render.mp4"
    path.write_bytes(b"fake mp4 bytes")
    return path


def test_the_outbox_refuses_bytes_other_than_the_approved(tmp_path: Path, video: Path) -> None:
    root = tmp_path / "outbox"
    wrong = {**META, "render_sha256": hashlib.sha256(b"other bytes").hexdigest()}
    with pytest.raises(ContentMismatch, match="not the approved"):
        publish_to_outbox(root, "tech", "abcDEF12345", video, wrong)
    assert list_outbox(root) == []
    assert [p.name for p in (root / "tech").iterdir()] == []  # no temp folder left either
