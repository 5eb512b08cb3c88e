"""MDAME_DIMENSIONS_DIR: an operator's own folder of niches is what the sync registers and what
the registry sensor compares the registry with."""

from __future__ import annotations

from pathlib import Path

import pytest

from mdame_core.settings import REPO_ROOT, dimensions_dir
from mdame_pipeline.dimension_registry import registry_drift, sync_registry


def test_the_sync_and_the_drift_read_the_configured_folder(
    admin, state, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert dimensions_dir() == REPO_ROOT / "dimensions"
    niche = (REPO_ROOT / "dimensions" / "tech.yaml").read_text()
    niches = tmp_path / "niches"
    niches.mkdir()
    (niches / "gardens.yaml").write_text(niche.replace("slug: tech", "slug: gardens", 1))
    monkeypatch.setenv("MDAME_DIMENSIONS_DIR", str(niches))
    assert dimensions_dir() == niches
    report = sync_registry(admin)
    assert report.active == ("gardens",)
    assert [d.slug for d in state.list_dimensions()] == ["gardens"]
    assert registry_drift(state).drift == ()
    (niches / "gardens.yaml").write_text(niche.replace("slug: tech", "slug: gardens", 1) + "\n")
    (niches / "orchards.yaml").write_text(niche.replace("slug: tech", "slug: orchards", 1))
    assert registry_drift(state).drift == (
        "niches/orchards.yaml is not registered yet: run `mdame dimensions sync`",
    )
