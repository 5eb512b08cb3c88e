"""What every check of `mdame doctor` shares: the options, the groups, and what one check learns
(ENV, the provider set, the database's dimensions) for the next, with the rows so far."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mdame_core import settings
from mdame_domain.doctor import GIB, Check, Redactor, Status, secret_values

# The providers' groups, in the order the doctor runs them (mdame_cli/doctor/providers.py).
PROVIDER_GROUPS = (
    "trends",
    "gemini",
    "safety",
    "generated",
    "diffusers",
    "relevance",
    "stock",
    "edge_tts",
    "youtube",
    "tiktok",
    "instagram",
    "telegram",
)
GROUPS = (
    "env",
    "database",
    "migrations",
    "roles",
    *PROVIDER_GROUPS,
    "redis",
    "run_servers",
    "object_store",
    "gpu",
    "ffmpeg",
    "disk",
)
# Variables whose values must never be printed (their presence may be): the model's secrets, the
# TikTok app's client key, and the third-party ones boto3 and huggingface read themselves. The
# database and broker URLs are printed with their passwords masked.
_SECRETS = tuple(n for n in settings.Settings.model_fields if settings.is_secret(n))
URL_VARS = tuple(n for n in _SECRETS if n.endswith("_URL"))
SECRET_VARS = (
    *(n for n in _SECRETS if n not in URL_VARS),
    "MDAME_TIKTOK_CLIENT_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "HF_TOKEN",
)
MIN_FREE_VAR = "MDAME_DOCTOR_MIN_FREE_GB"
DEFAULT_MIN_FREE_GB = 10.0


@dataclass
class Options:
    only: frozenset[str] = frozenset(GROUPS)
    timeout_s: float = 10.0
    min_free_bytes: int = int(DEFAULT_MIN_FREE_GB * GIB)
    gpu: str = "auto"  # auto | required | skip


@dataclass
class Doctor:
    """The checks' shared state, in order; what one learns (ENV, the database, the dimensions)
    the next uses."""

    options: Options
    redact: Redactor = field(default_factory=Redactor)
    env: str | None = None
    providers: str | None = None  # offline | production | fakes; None: unknown (bad ENV)
    db_ok: bool = False
    dimensions: list[Any] = field(default_factory=list)  # active DimensionConfigs
    dimension_rows: list[Any] = field(default_factory=list)  # mdame_core.state.Dimension
    resources: dict[str, Any] | None = None  # as the definitions bind them, once built
    # The providers' checks' answers by question (HealthScope.answers): each asked once a run.
    answers: dict[Any, Any] = field(default_factory=dict)
    checks: list[Check] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.redact.add(*secret_values(settings.environment(), SECRET_VARS))
        for name in URL_VARS:
            with contextlib.suppress(ValueError):
                password = urlsplit(settings.raw(name)).password
                if password:
                    self.redact.add(password)

    def add(self, name: str, status: Status, detail: str) -> None:
        self.checks.append(Check(name, status, self.redact(detail)))
