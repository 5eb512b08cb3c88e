"""A code location is its folder: an asset module dropped into the folder is part of the
location, with no other edit (no import to add, no list to extend).

The module goes into a copy of mdame_assets in a temporary directory, loaded by a child Python
whose path finds that copy first, so the package in the checkout (and other test workers
importing it) never sees the module.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from mdame_core.settings import REPO_ROOT
from mdame_runtime.locations import LOCATIONS as LOCATION_LIST

# location entry module -> the folder its definitions are loaded from
FOLDERS = {loc.module: loc.defs_module.rsplit(".", 1)[1] for loc in LOCATION_LIST}

THROWAWAY = '''"""An asset nobody imports."""

import dagster as dg


@dg.asset
def throwaway_probe() -> None:
    """Exists only to be found by the folder loader."""
'''

PROBE = """
import sys
from pathlib import Path

import dagster as dg
import mdame_assets

location = __import__(sys.argv[1], fromlist=["defs"])
assert Path(mdame_assets.__file__).is_relative_to(Path.cwd()), mdame_assets.__file__
keys = location.defs().resolve_asset_graph().get_all_asset_keys()
print("found" if dg.AssetKey("throwaway_probe") in keys else "missing")
"""


@pytest.mark.parametrize("entry", sorted(FOLDERS))
def test_an_asset_module_added_to_the_folder_is_loaded(entry: str, tmp_path: Path) -> None:
    copy = tmp_path / "mdame_assets"
    shutil.copytree(REPO_ROOT / "mdame_assets", copy, ignore=shutil.ignore_patterns("__pycache__"))
    folder = copy / FOLDERS[entry]
    assert folder.is_dir(), f"{entry} has no folder mdame_assets/{FOLDERS[entry]}"
    (folder / "throwaway_probe.py").write_text(THROWAWAY, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "ENV": os.environ.get("ENV", "dev")}
    done = subprocess.run(
        [sys.executable, "-c", PROBE, entry],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == "found", (
        f"throwaway_probe.py in mdame_assets/{FOLDERS[entry]}/ is not part of {entry}"
    )
