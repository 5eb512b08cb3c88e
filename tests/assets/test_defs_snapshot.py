"""Each code location's definitions, pinned: its asset keys, asset check keys, job, schedule and
sensor names and resource keys are those of tests/assets/defs_snapshot.json.

The locations load their folders, so a module added, moved or removed there changes what a
location holds without an edit anywhere else; this test names every such change. When a change
is meant, write the new snapshot and commit it with the change:

    .venv/bin/python -m tests.assets.test_defs_snapshot
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from mdame_runtime.locations import LOCATION_MODULES

SNAPSHOT = Path(__file__).with_name("defs_snapshot.json")
LOCATIONS = LOCATION_MODULES
UPDATE = "  .venv/bin/python -m tests.assets.test_defs_snapshot"


def location_snapshot(defs: dg.Definitions) -> dict[str, list[str]]:
    """What the location holds, by key and name, sorted (Dagster's implicit jobs left out)."""
    repo = defs.get_repository_def()
    graph = repo.asset_graph
    return {
        "assets": sorted(key.to_user_string() for key in graph.get_all_asset_keys()),
        "asset_checks": sorted(
            f"{key.asset_key.to_user_string()}:{key.name}" for key in graph.asset_check_keys
        ),
        "jobs": sorted(job.name for job in repo.get_all_jobs() if not job.name.startswith("__")),
        "schedules": sorted(schedule.name for schedule in repo.schedule_defs),
        "sensors": sorted(sensor.name for sensor in repo.sensor_defs),
        "resources": sorted(repo.get_top_level_resources()),
    }


def current() -> dict[str, Any]:
    return {
        name: location_snapshot(importlib.import_module(module).defs())
        for name, module in LOCATIONS.items()
    }


def _differences(pinned: dict[str, Any], now: dict[str, Any]) -> list[str]:
    lines = []
    for location in sorted(set(pinned) | set(now)):
        was, got = pinned.get(location, {}), now.get(location, {})
        for kind in sorted(set(was) | set(got)):
            before, after = set(was.get(kind, ())), set(got.get(kind, ()))
            lines += [f"  {location} {kind}: + {name}" for name in sorted(after - before)]
            lines += [f"  {location} {kind}: - {name}" for name in sorted(before - after)]
    return lines


@pytest.mark.parametrize("location", sorted(LOCATIONS))
def test_location_holds_what_the_snapshot_pins(location: str) -> None:
    pinned = json.loads(SNAPSHOT.read_text(encoding="utf-8"))
    now = {location: location_snapshot(importlib.import_module(LOCATIONS[location]).defs())}
    changed = _differences({location: pinned.get(location, {})}, now)
    assert not changed, (
        f"the {location} code location's definitions differ from {SNAPSHOT.name} "
        "(+ loaded now, - pinned but gone):\n"
        + "\n".join(changed)
        + f"\nIf the change is meant, rewrite the snapshot and commit it:\n{UPDATE}"
    )


if __name__ == "__main__":
    os.environ.setdefault("ENV", "dev")  # as tests/conftest.py sets it
    SNAPSHOT.write_text(json.dumps(current(), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    print(f"wrote {SNAPSHOT}", file=sys.stderr)
