"""What every check of `mdame doctor` shares: the options, the groups, and what one check learns
(ENV, the provider set, the database's dimensions) for the next, with the rows so far."""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from mdame_core import settings
from mdame_domain.doctor import GIB, Check, Redactor, Status, secret_values

GROUPS = (
    "env",
    "database",
    "migrations",
    "roles",
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
    "redis",
    "run_servers",
    "object_store",
    "gpu",
    "ffmpeg",
    "disk",
)
# Variables whose values must never be printed (their presence may be).
SECRET_VARS = (
    "GEMINI_API_KEY",
    "YOUTUBE_API_KEY",
    "MDAME_PEXELS_API_KEY",
    "MDAME_PIXABAY_API_KEY",
    "MDAME_TELEGRAM_BOT_TOKEN",
    "MDAME_TIKTOK_CLIENT_KEY",
    "MDAME_TIKTOK_CLIENT_SECRET",
    "MDAME_INSTAGRAM_APP_SECRET",
    "MDAME_MASTER_KEY",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "HF_TOKEN",
    "MDAME_REDIS_PASSWORD",
)
URL_VARS = (
    "MDAME_DATABASE_URL",
    "MDAME_APP_DATABASE_URL",
    "MDAME_DAGSTER_DATABASE_URL",
    "MDAME_CELERY_BROKER_URL",
    "MDAME_CELERY_BACKEND_URL",
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
