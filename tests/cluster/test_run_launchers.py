"""deploy/dagster.k8s.yaml and deploy/dagster.docker.yaml are instance files the installed Dagster
accepts: the whole file against the instance schema, the launcher's config against its class's
own schema. Nothing is built (the K8sRunLauncher loads a kube config when it is) and nothing is
reached; docs/deployment.md, "Run workers on many hosts", shows them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from dagster._config import process_config
from dagster._core.errors import DagsterInvalidConfigError
from dagster._core.instance.config import dagster_instance_config
from dagster._serdes.config_class import class_from_code_pointer

REPO = Path(__file__).resolve().parents[2]
DEPLOY = REPO / "deploy"
# The instance file and the variables its launcher config names (placeholders: only the
# config's shape is checked).
LAUNCHERS = {
    "dagster.k8s.yaml": {
        "MDAME_K8S_IMAGE": "registry.example/mdame:1",
        "MDAME_K8S_NAMESPACE": "mdame",
    },
    "dagster.docker.yaml": {"MDAME_DOCKER_IMAGE": "registry.example/mdame:1"},
}
# What must not drift from the repository's dagster.yaml: a run launcher changes where runs
# start, not where Dagster keeps its records or how many runs go at once.
SAME_AS_DAGSTER_YAML = ("storage", "run_coordinator", "concurrency", "telemetry", "nux")


def _load(path: Path) -> dict[str, Any]:
    return yaml.safe_load(path.read_text())


def launcher_errors(path: Path) -> list[str]:
    """The launcher's config checked against the launcher class's own config schema."""
    launcher = _load(path)["run_launcher"]
    cls: Any = class_from_code_pointer(launcher["module"], launcher["class"])
    result = process_config(cls.config_type(), launcher.get("config") or {})
    return [] if result.success else [error.message for error in result.errors or []]


@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_instance_file_passes_dagsters_instance_schema(name: str) -> None:
    config, custom_class = dagster_instance_config(str(DEPLOY), name)
    assert custom_class is None
    monitoring = config["run_monitoring"]
    # These launchers report a run worker's health: the daemon fails a run whose worker died,
    # and a resumed run would meet the dead worker's pipeline lock (docs/deployment.md).
    assert monitoring["enabled"] and monitoring["max_resume_run_attempts"] == 0
    ours, repo = _load(DEPLOY / name), _load(REPO / "dagster.yaml")
    for key in SAME_AS_DAGSTER_YAML:
        assert ours[key] == repo[key], f"{name}: {key} differs from dagster.yaml"


@pytest.mark.parametrize("name", sorted(LAUNCHERS))
def test_launcher_config_passes_the_launchers_own_schema(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var, value in LAUNCHERS[name].items():
        monkeypatch.setenv(var, value)
    assert launcher_errors(DEPLOY / name) == []


@pytest.mark.parametrize(
    ("name", "section", "key"),
    [
        ("dagster.k8s.yaml", "run_launcher", "job_imag"),
        ("dagster.docker.yaml", "run_launcher", "netwrks"),
        ("dagster.k8s.yaml", "run_monitoring", "poll_interval_secs"),
    ],
)
def test_a_misspelled_key_is_refused(
    name: str, section: str, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checks above can fail: a key the schema does not know is named in the error."""
    config = _load(DEPLOY / name)
    if section == "run_launcher":
        config["run_launcher"]["config"][key] = "x"
        for var, value in LAUNCHERS[name].items():
            monkeypatch.setenv(var, value)
        path = tmp_path / name
        path.write_text(yaml.safe_dump(config))
        assert any(key in error for error in launcher_errors(path))
    else:
        config[section][key] = 30
        (tmp_path / name).write_text(yaml.safe_dump(config))
        with pytest.raises(DagsterInvalidConfigError, match=key):
            dagster_instance_config(str(tmp_path), name)
