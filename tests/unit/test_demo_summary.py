"""`make demo`'s closing lines name the niche files it skipped, and agree with its exit status."""

from __future__ import annotations

import shutil
from pathlib import Path

from mdame_cli.demo import summary
from mdame_core.settings import REPO_ROOT
from mdame_domain.dimensions import load_registry
from mdame_domain.publish_summary import PartitionFacts


def _errors(tmp_path: Path) -> list[str]:
    shutil.copy(REPO_ROOT / "dimensions" / "tech.yaml", tmp_path / "tech.yaml")
    (tmp_path / "broken.yaml").write_text("slug: broken\ntitle: [unclosed\n", encoding="utf-8")
    return [str(e) for e in load_registry(tmp_path).errors]


OK = PartitionFacts("2026-11-29|tech", "tech", True, videos=1)


def test_a_skipped_niche_file_is_named_and_fails_the_demo(tmp_path: Path) -> None:
    errors = _errors(tmp_path)
    assert len(errors) == 1
    lines, code = summary([OK], errors, 3.0, "/outbox")
    assert code == 1
    assert lines[0].startswith("1/1 dimensions published")
    assert "1 niche file(s) skipped as malformed" in lines[1] and "exit status 1" in lines[1]
    assert "broken.yaml" in lines[2]


def test_all_published_and_no_skipped_file_is_success() -> None:
    lines, code = summary([OK], [], 3.0, "/outbox")
    assert (code, len(lines)) == (0, 1)


def test_a_failed_dimension_is_named() -> None:
    failed = PartitionFacts("2026-11-29|science", "science", False, "boom")
    lines, code = summary([OK, failed], [], 3.0, "/outbox")
    assert code == 1 and lines[0].startswith("1/2 dimensions published")
    assert "failed: 2026-11-29|science" in lines[-1]
    assert summary([], [], 0.0, "/outbox")[1] == 1
