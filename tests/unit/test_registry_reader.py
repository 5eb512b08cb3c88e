"""The registry sensor's reader keeps parsed niche files between ticks, and still sees every
edit, new file, broken file and removal."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from mdame_domain.dimensions import RegistryReader, load_registry

DIMENSIONS = Path(__file__).resolve().parents[2] / "dimensions"


def test_unchanged_files_are_kept_and_every_change_is_seen(tmp_path: Path) -> None:
    folder = tmp_path / "dimensions"
    shutil.copytree(DIMENSIONS, folder)
    reader = RegistryReader()
    first = {d.slug: d for d in reader.load(folder).dimensions}
    again = {d.slug: d for d in reader.load(folder).dimensions}
    assert again.keys() == first.keys() and all(again[s] is first[s] for s in first)

    tech = folder / "tech.yaml"
    # An edit that keeps the file's size and its modification time is still seen (change time).
    stat = tech.stat()
    text = tech.read_text().replace("Tech in 60 Seconds", "Tech in 60 Minutes")
    assert len(text) == stat.st_size
    tech.write_text(text)
    os.utime(tech, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    edited = {d.slug: d for d in reader.load(folder).dimensions}
    assert edited["tech"].title == "Tech in 60 Minutes"
    assert edited["science"] is first["science"]

    tech.write_text("slug: tech\ntitle: [broken\n")
    (folder / "science.yaml").unlink()
    broken = reader.load(folder)
    assert [d.slug for d in broken.dimensions] == ["cooking"]
    assert [Path(e.source).stem for e in broken.errors] == ["tech"]
    fresh = load_registry(folder)  # what a reader without memory finds
    assert broken.dimensions == fresh.dimensions
    assert [str(e) for e in broken.errors] == [str(e) for e in fresh.errors]

    tech.write_text(text)
    assert [d.slug for d in reader.load(folder).dimensions] == ["cooking", "tech"]
