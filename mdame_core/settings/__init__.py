"""Where things are: the database URLs, the environment name and the local data folder.

Resolution order for the database: MDAME_DATABASE_URL (an external database, e.g. a Supabase
project; connect as its owner) or the project-local cluster that scripts/db-local.sh records in
$MDAME_HOME/pg.env.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from mdame_core.settings.model import Settings
from mdame_core.settings.reader import (
    SettingsError,
    default,
    effective,
    environment,
    get,
    is_secret,
    is_set,
    os_variable,
    raw,
    set_default,
    set_variable,
    validate,
)
from mdame_core.settings.reference import reference_markdown

__all__ = [
    "Settings",
    "SettingsError",
    "default",
    "effective",
    "environment",
    "get",
    "is_secret",
    "is_set",
    "os_variable",
    "raw",
    "reference_markdown",
    "set_default",
    "set_variable",
    "validate",
]

Role = Literal["app", "admin", "owner"]
ENVIRONMENTS = ("dev", "prod")
REPO_ROOT = Path(__file__).resolve().parents[2]
APP_ROLE = "mdame_app"
# Operator commands (budget caps, channel grants, the dimension registry) act as this role;
# the pipeline's app role cannot run them.
ADMIN_ROLE = "mdame_admin"
OWNER_ROLE = "mdame_owner"
DEFAULT_DBNAME = "mdame"


def mdame_home() -> Path:
    """Project-local state that is not in PostgreSQL: the dev cluster, media store, outbox."""
    return Path(raw("MDAME_HOME") or REPO_ROOT / ".mdame")


DIMENSIONS_DIR_ENV = "MDAME_DIMENSIONS_DIR"


def dimensions_dir() -> Path:
    """Where the dimensions' YAML files are: MDAME_DIMENSIONS_DIR (an operator's own folder of
    niches), else the checkout's dimensions/."""
    return Path(raw(DIMENSIONS_DIR_ENV) or REPO_ROOT / "dimensions")


def mdame_env() -> str:
    """ENV is mandatory: the database belongs to one environment and refuses the other."""
    env = raw("ENV")
    if env not in ENVIRONMENTS:
        raise SettingsError(
            f"ENV must be set to one of {', '.join(ENVIRONMENTS)} (got {env!r}); "
            "the database records its environment and refuses clients of another"
        )
    return env


# Operator commands (`mdame ...`, the crash harness) default ENV as the Makefile does, so they
# work in a fresh shell. Only dev: prod is never a default (a prod database refuses dev clients).
DEFAULT_ENV = "dev"


def default_env() -> bool:
    """Set ENV to dev when it is unset or empty; True when it did. A wrong value is left for
    mdame_env() to refuse. Library code and code servers keep requiring ENV."""
    if raw("ENV"):
        return False
    set_variable("ENV", DEFAULT_ENV)
    return True


# Unix sockets (Dagster's gRPC servers) are made under TMPDIR and their paths max out at 107
# bytes: a deeper home keeps the system temp folder.
_MAX_TMPDIR_LEN = 60


def use_scratch_tmpdir() -> Path | None:
    """TMPDIR for this process and its children (Dagster runs, ffmpeg): $MDAME_HOME/tmp, unless
    TMPDIR is set already. What a killed run leaves there stays with the rest of the
    deployment's scratch files instead of piling up as empty /tmp/tmpXXXXXXXX folders."""
    if os_variable("TMPDIR"):
        return None
    folder = mdame_home() / "tmp"
    if len(str(folder)) > _MAX_TMPDIR_LEN:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    set_variable("TMPDIR", str(folder))
    import tempfile  # only here: settings is imported everywhere

    tempfile.tempdir = None
    return folder


def _local_cluster() -> tuple[str, int]:
    envfile = mdame_home() / "pg.env"
    if not envfile.exists():
        raise SettingsError(
            f"no database configured: set MDAME_DATABASE_URL, or start the local cluster with "
            f"`make db` (expected {envfile})"
        )
    values = dict(line.split("=", 1) for line in envfile.read_text().splitlines() if "=" in line)
    return "127.0.0.1", int(values["MDAME_PG_PORT"])


def is_external() -> bool:
    return is_set("MDAME_DATABASE_URL")


def database_url(role: Role = "app", dbname: str | None = None) -> str:
    """The connection URL for `role`, optionally for another database on the same server.

    With an external database the app URL is MDAME_APP_DATABASE_URL. Only with ENV=dev may it
    be left out: the client then uses the owner URL and drops to the app role with SET ROLE,
    which code holding the connection could RESET, so anywhere else it is required.
    The admin URL is MDAME_ADMIN_DATABASE_URL, else the owner's: the operator who holds the
    owner URL (to migrate) may act as admin, which is a subset of the owner's rights.
    """
    if role == "admin":
        admin_url = get("MDAME_ADMIN_DATABASE_URL")
        if admin_url:
            return _with_dbname(admin_url, dbname) if dbname else admin_url
        role = "owner"
    external = get("MDAME_DATABASE_URL")
    if external:
        url = external
        if role == "app":
            app_url = get("MDAME_APP_DATABASE_URL")
            if not app_url and raw("ENV") != "dev":
                raise SettingsError(
                    f"MDAME_APP_DATABASE_URL is required with an external database outside "
                    f"ENV=dev (ENV={raw('ENV')!r}): set it to a URL that logs in "
                    f"as {APP_ROLE}; the owner URL with SET ROLE is a dev convenience only"
                )
            url = app_url or external
        return _with_dbname(url, dbname) if dbname else url
    host, port = _local_cluster()
    user = APP_ROLE if role == "app" else OWNER_ROLE
    return f"postgresql://{user}@{host}:{port}/{dbname or DEFAULT_DBNAME}"


def superuser_url(dbname: str = "postgres") -> str:
    """The local cluster's superuser (tests and the crash harness); external setups have none."""
    host, port = _local_cluster()
    return f"postgresql://postgres@{host}:{port}/{dbname}"


def _with_dbname(url: str, dbname: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + dbname))
