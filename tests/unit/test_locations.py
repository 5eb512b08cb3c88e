"""The code locations are listed once (mdame_runtime.locations): the workspace files and the dg
projects are generated from that list and must be current, and Dagster accepts them."""

from __future__ import annotations

import yaml
from dagster._core.workspace.config_schema import process_workspace_config

from mdame_core.settings import REPO_ROOT
from mdame_runtime import locations


def test_the_generated_files_are_current() -> None:
    assert locations.main([]) == 0, "run: python -m mdame_runtime.locations --write"


def test_a_stale_file_is_found(tmp_path, monkeypatch, capsys) -> None:
    stale = tmp_path / "workspace.yaml"
    stale.write_text("load_from: []\n")
    monkeypatch.setattr(locations, "REPO_ROOT", tmp_path)
    monkeypatch.setattr(locations, "generated_files", lambda: {stale: locations.workspace_yaml()})
    assert locations.main([]) == 1
    assert "workspace.yaml is stale" in capsys.readouterr().out


def test_dagster_accepts_the_workspaces_and_they_name_every_location() -> None:
    names = [location.name for location in locations.LOCATIONS]
    for path in ("workspace.yaml", "deploy/workspace.prod.yaml"):
        config = yaml.safe_load((REPO_ROOT / path).read_text())
        entries = [next(iter(entry.values()))["location_name"] for entry in config["load_from"]]
        assert entries == names, path
    assert process_workspace_config(yaml.safe_load(locations.workspace_yaml())).success
