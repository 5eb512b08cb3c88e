"""DAGSTER_HOME for this checkout: .mdame/dagster, with the repo's dagster.yaml linked in and
its storage pointed at the `dagster` database of the same PostgreSQL server."""

from __future__ import annotations

from pathlib import Path

from mdame_core import settings
from mdame_core.settings import REPO_ROOT, database_url, mdame_home

DAGSTER_DBNAME = "dagster"


def dagster_environment() -> dict[str, str]:
    """The variables a Dagster process of this project needs (also printed by `mdame env`)."""
    home = Path(settings.raw("DAGSTER_HOME") or mdame_home() / "dagster")
    home.mkdir(parents=True, exist_ok=True)
    link = home / "dagster.yaml"
    if not link.exists():
        link.symlink_to(REPO_ROOT / "dagster.yaml")
    return {
        "DAGSTER_HOME": str(home),
        "MDAME_DAGSTER_DATABASE_URL": settings.get("MDAME_DAGSTER_DATABASE_URL")
        or database_url("owner", DAGSTER_DBNAME),
    }


def apply_dagster_environment() -> dict[str, str]:
    env = dagster_environment()
    for name, value in env.items():
        settings.set_variable(name, value)
    return env
