"""Every environment variable MD-AME reads, declared once: its type, default, unit and what it
does. The field's name is the variable's name. Code reads a value through
`mdame_core.settings.get(NAME)`, `mdame config` prints the effective values, and the docs'
configuration page is generated from these classes, so the three cannot drift apart.

Each group is a class; its docstring's first line is the group's title in `mdame config` and
on the configuration page. A default shown as text (`shown`) is one computed from another
setting, such as a folder under MDAME_HOME.
"""

from __future__ import annotations

from datetime import date
from typing import Any, Literal

from pydantic import Field, NonNegativeFloat, NonNegativeInt, PositiveFloat, PositiveInt, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict


def var(
    default: Any,
    description: str,
    unit: str = "",
    *,
    shown: str = "",
    ge: float | None = None,
    le: float | None = None,
) -> Any:
    """A declared variable: its default, one line of description, its unit, and (`shown`) how
    the docs state a default that is computed."""
    extra: dict[str, Any] = {"unit": unit, "shown": shown}
    # A duration of nan or inf is a typo, never a setting.
    finite = False if isinstance(default, float) else None
    return Field(
        default,
        description=description,
        ge=ge,
        le=le,
        json_schema_extra=extra,
        allow_inf_nan=finite,
    )


class _Group(BaseSettings):
    # Names are matched exactly; an empty value counts as unset, as every reader always did.
    model_config = SettingsConfigDict(case_sensitive=True, env_ignore_empty=True, extra="ignore")


class Deployment(_Group):
    """Deployment: where things are and which providers run"""

    ENV: Literal["dev", "prod"] | None = var(
        None,
        "The deployment's environment; the database records it and refuses clients of the "
        "other. Required by code servers; operator commands default it to dev",
    )
    MDAME_HOME: str = var(
        "", "Local state outside PostgreSQL: dev cluster, media, logs", shown=".mdame"
    )
    MDAME_DIMENSIONS_DIR: str = var("", "The folder of niche YAML files", shown="dimensions/")
    MDAME_PROVIDERS: Literal["offline", "fakes", "production"] | None = var(
        None,
        "Which providers the resources bind: offline (no network), fakes (production clients "
        "against local protocol servers) or production",
        shown="production with ENV=prod, else offline",
    )
    MDAME_FIRST_DAY: date = var(date(2026, 11, 1), "The first day partition (YYYY-MM-DD)")
    MDAME_MEDIA_PROFILE: Literal["shorts", "tiny"] = var(
        "shorts", "Media size: shorts (1080x1920) or tiny (216x384, tests and crash harnesses)"
    )
    MDAME_VIDEO_ENCODER: Literal["auto", "libx264", "h264_nvenc"] = var(
        "auto", "The H.264 encoder; auto takes NVENC where ffmpeg has a working one"
    )
    MDAME_LOG_FILE: str = var(
        "", "The JSON pipeline log; unset: operator commands log to $MDAME_HOME/logs/pipeline.jsonl"
    )
    MDAME_DEBUG: bool = var(False, "Command-line errors print their traceback")
    DAGSTER_HOME: str = var("", "Dagster's instance folder", shown="$MDAME_HOME/dagster")


class Database(_Group):
    """Database: PostgreSQL, the single source of truth"""

    MDAME_DATABASE_URL: SecretStr | None = var(
        None, "An external database, as its owner; unset: the local cluster of `make db`"
    )
    MDAME_APP_DATABASE_URL: SecretStr | None = var(
        None, "The pipeline's login as mdame_app; required with an external database outside dev"
    )
    MDAME_ADMIN_DATABASE_URL: SecretStr | None = var(
        None, "Operator commands' login as mdame_admin", shown="the owner URL"
    )
    MDAME_DAGSTER_DATABASE_URL: SecretStr | None = var(
        None, "Dagster's run and event storage", shown="the mdame_dagster database beside MD-AME's"
    )
    MDAME_STATE_POOL_MAX: PositiveInt = var(
        4, "Connections each process keeps to PostgreSQL", "connections"
    )


class Orchestration(_Group):
    """Orchestration: retries, waits, locks and leases"""

    MDAME_STEP_RETRIES: NonNegativeInt = var(
        4, "Dagster's retries of a step that failed transiently"
    )
    MDAME_STEP_RETRY_DELAY_S: PositiveFloat = var(
        3.0, "The first retry's delay; each next one doubles, with +-50 % jitter", "s"
    )
    MDAME_HOP_SENSOR_INTERVAL_S: PositiveInt = var(
        30, "How often the hop and content-retry sensors look for work", "s"
    )
    MDAME_RETRY_WINDOW_DAYS: NonNegativeInt = var(
        1, "For how many days after its own a partition that failed is still retried", "days"
    )
    MDAME_RETRY_BACKOFF_S: PositiveFloat = var(
        120.0, "The first wait before a failed partition is retried", "s"
    )
    MDAME_RETRY_BACKOFF_MAX_S: PositiveFloat = var(
        3600.0, "The longest wait between its retries", "s"
    )
    MDAME_LOCK_TTL_S: PositiveFloat = var(
        120.0, "A pipeline lock's lease; a killed holder's lock is free after it", "s"
    )
    MDAME_JOB_LEASE_S: PositiveFloat = var(300.0, "A scene job's lease on its worker", "s")
    MDAME_STALL_AFTER_S: PositiveFloat = var(
        600.0, "A work unit unchanged this long in an in-progress state was left by a crash", "s"
    )
    MDAME_STALL_MAX_ATTEMPTS: PositiveInt = var(3, "Resumes of a stalled work unit before it fails")
    MDAME_SCENE_RETRY_S: PositiveFloat = var(
        300.0, "A scene's wait after a transient provider failure before it is claimed again", "s"
    )
    MDAME_WORKER_NAME: str = var(
        "", "A name for this worker, in the ids of the scene results it makes"
    )
    MDAME_RUN_RETENTION_DAYS: PositiveInt = var(
        30, "Dagster runs older than this are deleted, with their events and logs", "days", le=3650
    )
    MDAME_RUN_HISTORY_DAYS: PositiveInt = var(
        180,
        "A partition's last run of a job is deleted too once this old, bounding the event log",
        "days",
        le=3650,
    )


class RunServers(_Group):
    """Code and run servers: where definitions load and run workers start"""

    MDAME_ORCHESTRATOR_CODE_SERVER_HOST: str = var(
        "", "Production: the orchestrator location's code server host (deploy/workspace.prod.yaml)"
    )
    MDAME_ORCHESTRATOR_CODE_SERVER_PORT: PositiveInt | None = var(
        None, "Production: the orchestrator location's code server port"
    )
    MDAME_GPU_CODE_SERVER_HOST: str = var("", "Production: the GPU location's code server host")
    MDAME_GPU_CODE_SERVER_PORT: PositiveInt | None = var(
        None, "Production: the GPU location's code server port"
    )

    MDAME_RUN_SERVERS: str = var(
        "",
        "location=/path.sock pairs, comma-separated: each code location's run server",
        shown="$MDAME_HOME/run/LOCATION.sock",
    )
    MDAME_RUN_SERVER_MAX_RUNS: PositiveInt = var(
        16, "Run workers a run server keeps alive at once", "runs"
    )
    MDAME_RUN_SERVER_REQUEST_TIMEOUT_S: PositiveFloat = var(
        5.0, "How long a request to a run server may take to arrive whole", "s"
    )


class Executors(_Group):
    """Executors: where steps run"""

    MDAME_ORCHESTRATOR_EXECUTOR: Literal["in_process", "multiprocess", "celery", "k8s"] = var(
        "in_process", "The orchestrator location's executor"
    )
    MDAME_GPU_EXECUTOR: Literal["in_process", "multiprocess", "celery", "k8s"] = var(
        "in_process", "The GPU location's executor"
    )
    MDAME_CELERY_BROKER_URL: SecretStr | None = var(
        None, "Celery's broker (Redis); required by the celery executor"
    )
    MDAME_CELERY_BACKEND_URL: SecretStr | None = var(
        None, "Celery's result backend; required by the celery executor"
    )
    MDAME_CELERY_VISIBILITY_TIMEOUT_S: PositiveInt = var(
        7200, "Longer than any GPU step: an unacknowledged step is redelivered after it", "s"
    )
    MDAME_REDIS_PASSWORD: SecretStr | None = var(
        None, "The Redis broker's password, for dagster.yaml"
    )
    MDAME_GPU_RUN_MAX_S: PositiveInt = var(
        21600, "A GPU run older than this is failed by run monitoring, and alerts", "s"
    )
    MDAME_DAGSTER_IO_URL: str = var(
        "",
        "s3://bucket/prefix where steps on several hosts pass outputs; required by celery and k8s",
    )
    MDAME_DOCKER_IMAGE: str = var(
        "", "The run containers' image, for deploy/dagster.docker.yaml's Docker run launcher"
    )
    MDAME_K8S_IMAGE: str = var("", "The step pods' image; required by the k8s executor")
    MDAME_K8S_NAMESPACE: str = var("default", "The step pods' namespace")
    MDAME_K8S_ENV_SECRETS: str = var("", "Kubernetes Secrets (comma-separated) the step pods load")
    MDAME_K8S_KUBECONFIG: str = var("", "A kubeconfig file; unset: the in-cluster config")
    MDAME_K8S_RENDER_CPU: str = var("2", "CPU a render step pod requests", "cores")
    MDAME_K8S_RENDER_MEMORY: str = var("2Gi", "Memory a render step pod requests")


class LocalServices(_Group):
    """Local services: the PostgreSQL and Redis that make db and the tests start"""

    MDAME_PG_BIN: str = var(
        "", "PostgreSQL's server binaries for scripts/db-local.sh", shown="the newest installed"
    )
    MDAME_REDIS_SERVER: str = var(
        "", "redis-server for scripts/redis-local.sh", shown="redis-server on the PATH"
    )
    MDAME_REDIS_PORT: PositiveInt | None = var(
        None, "The local Redis's port", shown="derived from the checkout's path"
    )
    MDAME_REDIS_BIND: str = var(
        "127.0.0.1", "The local Redis's address; another needs MDAME_REDIS_PASSWORD"
    )


class Media(_Group):
    """Media: the store, its retention and the disk"""

    MDAME_MEDIA_URL: str = var(
        "", "s3://bucket/prefix?endpoint=...: a shared object store; unset: a local folder"
    )
    MDAME_MEDIA_ROOT: str = var("", "The local store's folder", shown="$MDAME_HOME/media")
    MDAME_MEDIA_CACHE_BYTES: PositiveInt = var(
        4 << 30, "The local cache of a remote store", "bytes"
    )
    MDAME_RETENTION_RENDER_DAYS: NonNegativeInt = var(
        30, "Renders are deleted this long after publishing", "days", le=3650
    )
    MDAME_RETENTION_VOICE_DAYS: NonNegativeInt = var(
        7, "Voice tracks are deleted this long after publishing", "days", le=3650
    )
    MDAME_DISK_LOW_BYTES: NonNegativeInt = var(
        5 << 30, "Alert when the store's disk has less free", "bytes"
    )
    MDAME_DISK_LOW_PERCENT: NonNegativeFloat = var(
        10.0, "Alert when the store's disk has less free", "%", le=100
    )
    MDAME_DOCTOR_MIN_FREE_GB: NonNegativeFloat = var(
        10.0, "mdame doctor FAILs with less free disk", "GB"
    )
    MDAME_MODEL_DIR: str = var(
        "", "Model weights for diffusers, as hub-id folders", shown="$MDAME_HOME/models"
    )
    MDAME_DIFFUSERS_MODEL_DIR: str = var("", "Forwarded to step pods with MDAME_MODEL_DIR")


class Rendering(_Group):
    """Rendering: the video's timing"""

    MDAME_HOOK_MIN_S: PositiveFloat = var(2.0, "The hook stays on screen at least this long", "s")
    MDAME_HOOK_MAX_S: PositiveFloat = var(5.0, "The hook stays on screen at most this long", "s")
    MDAME_SCENE_TIMING_TOLERANCE_S: PositiveFloat = var(
        0.25, "scene_timing fails a render with a cut further off its word", "s"
    )


class Gemini(_Group):
    """Gemini: text, images, judgement and speech"""

    GEMINI_API_KEY: SecretStr | None = var(None, "The Gemini API key (production and fakes)")
    MDAME_GEMINI_BASE_URL: str = var(
        "", "Gemini's endpoint", shown="https://generativelanguage.googleapis.com"
    )
    MDAME_GEMINI_GRACE_S: PositiveFloat = var(
        180.0, "How long a killed run's call may still be in flight before it is settled", "s"
    )
    MDAME_GEMINI_TRANSIENT_TRIES: PositiveInt = var(
        4, "Tries of a call that fails transiently, within a step"
    )
    MDAME_GEMINI_BACKOFF_S: PositiveFloat = var(1.0, "The first wait between those tries", "s")
    MDAME_GEMINI_BACKOFF_MAX_S: PositiveFloat = var(30.0, "The longest wait between them", "s")
    MDAME_HTTP_KEEPALIVE_S: PositiveFloat = var(
        15.0, "How long an idle connection is kept for reuse", "s"
    )


class Voice(_Group):
    """Voice: Edge-TTS, then Gemini TTS, then HALT"""

    MDAME_EDGE_TTS_URL: str = var("", "Edge-TTS's WebSocket endpoint", shown="the edge-tts default")
    MDAME_VOICE_BACKOFF_S: PositiveFloat = var(
        900.0, "The first wait after every voice failed", "s"
    )
    MDAME_VOICE_BACKOFF_MAX_S: PositiveFloat = var(
        3600.0, "The longest wait between voice tries", "s"
    )


class Stock(_Group):
    """Stock footage: Pexels and Pixabay"""

    MDAME_PEXELS_API_KEY: SecretStr | None = var(None, "Pexels' API key")
    MDAME_PIXABAY_API_KEY: SecretStr | None = var(None, "Pixabay's API key")
    MDAME_PEXELS_URL: str = var("", "Pexels' endpoint", shown="https://api.pexels.com")
    MDAME_PIXABAY_URL: str = var("", "Pixabay's endpoint", shown="https://pixabay.com")
    MDAME_STOCK_TIMEOUT_S: PositiveFloat = var(20.0, "A search's deadline", "s")
    MDAME_STOCK_DOWNLOAD_S: PositiveFloat = var(180.0, "A download's deadline", "s")
    MDAME_STOCK_MAX_BYTES: PositiveInt = var(64 << 20, "The largest file downloaded", "bytes")
    MDAME_STOCK_TRANSIENT_TRIES: PositiveInt = var(3, "Tries of a search that fails transiently")
    MDAME_STOCK_BACKOFF_S: PositiveFloat = var(1.0, "The first wait between those tries", "s")
    MDAME_STOCK_RATE_WAIT_S: PositiveFloat = var(
        60.0, "The wait after a 429 without a reset time", "s"
    )
    MDAME_STOCK_SEARCH_CACHE_S: PositiveFloat = var(
        86400.0, "How long a search's answer is reused", "s"
    )
    MDAME_STOCK_CACHE_DIR: str = var(
        "", "Where search answers are cached", shown="$MDAME_HOME/stock-cache"
    )


class Trends(_Group):
    """Trend sources"""

    YOUTUBE_API_KEY: SecretStr | None = var(
        None, "YouTube Data API key for youtube_most_popular sources"
    )
    MDAME_YOUTUBE_ROOT_URL: str = var(
        "",
        "YouTube Data API's root (trends and uploads)",
        shown="https://www.googleapis.com for trends, https://youtube.googleapis.com for uploads",
    )
    MDAME_GOOGLE_TRENDS_ROOT_URL: str = var(
        "", "Google Trends' root", shown="https://trends.google.com"
    )
    MDAME_REDDIT_ROOT_URL: str = var("", "Reddit's root", shown="https://www.reddit.com")


class Publishing(_Group):
    """Publishing: YouTube, TikTok and Instagram"""

    MDAME_YOUTUBE_CLIENT_SECRETS: str = var(
        "", "The Google OAuth client's client_secrets.json (a path)"
    )
    MDAME_GOOGLE_TOKEN_URI: str = var(
        "", "Google's token endpoint", shown="https://oauth2.googleapis.com/token"
    )
    MDAME_UPLOAD_GRACE_S: PositiveFloat = var(
        120.0, "A killed upload's session is resumed only after this", "s"
    )
    MDAME_UPLOAD_REQUEST_MARGIN_S: PositiveFloat = var(
        10.0, "A request to an upload session ends this long before the holder's lease", "s"
    )
    MDAME_GONE_SESSION_RECHECK_S: PositiveFloat = var(
        300.0,
        "A gone session counts as unpublished only after a second search this much later",
        "s",
    )
    MDAME_TIKTOK_CLIENT_KEY: str = var("", "The TikTok app's client key")
    MDAME_TIKTOK_CLIENT_SECRET: SecretStr | None = var(None, "The TikTok app's client secret")
    MDAME_TIKTOK_BASE_URL: str = var("", "TikTok's API", shown="https://open.tiktokapis.com")
    MDAME_TIKTOK_AUTH_URL: str = var(
        "", "TikTok's consent page", shown="https://www.tiktok.com/v2/auth/authorize/"
    )
    MDAME_TIKTOK_STATUS_POLL_S: PositiveFloat = var(
        5.0, "How often a TikTok upload's status is asked", "s"
    )
    MDAME_TIKTOK_RATE_WINDOW_S: PositiveFloat = var(
        60.0, "The window of TikTok's per-minute limits", "s"
    )
    MDAME_INSTAGRAM_APP_ID: str = var("", "The Instagram app's id (connecting an account)")
    MDAME_INSTAGRAM_APP_SECRET: SecretStr | None = var(
        None, "The Instagram app's secret (connecting an account)"
    )
    MDAME_INSTAGRAM_GRAPH_URL: str = var(
        "", "Instagram's Graph API", shown="https://graph.instagram.com"
    )
    MDAME_INSTAGRAM_AUTH_URL: str = var(
        "", "Instagram's consent page", shown="https://www.instagram.com/oauth/authorize"
    )
    MDAME_INSTAGRAM_TOKEN_URL: str = var(
        "", "Instagram's code exchange", shown="https://api.instagram.com/oauth/access_token"
    )
    MDAME_INSTAGRAM_STATUS_POLL_S: PositiveFloat = var(
        5.0, "How often a container's status is asked", "s"
    )


class Credentials(_Group):
    """Credentials: the master key that seals stored grants"""

    MDAME_MASTER_KEY: SecretStr | None = var(
        None, "The master key, base64 of 32 bytes; unset: the key file"
    )
    MDAME_MASTER_KEY_FILE: str = var(
        "", "The master key's file (0600)", shown="$MDAME_HOME/master.key"
    )
    MDAME_MASTER_KEY_PREVIOUS: SecretStr | None = var(
        None, "The key a rotation replaced; unset: the key file's .previous"
    )
    MDAME_KEY_GRACE_S: NonNegativeFloat = var(
        7 * 86400.0, "How long after a rotation the replaced key still opens grants", "s"
    )


class Alerts(_Group):
    """Alerts: Telegram"""

    MDAME_TELEGRAM_BOT_TOKEN: SecretStr | None = var(None, "The Telegram bot's token")
    MDAME_TELEGRAM_CHAT_ID: str = var("", "The operators' chat; a niche may name its own")
    MDAME_TELEGRAM_API_URL: str = var("", "Telegram's Bot API", shown="https://api.telegram.org")


class Settings(
    Deployment,
    Database,
    Orchestration,
    RunServers,
    Executors,
    LocalServices,
    Media,
    Rendering,
    Gemini,
    Voice,
    Stock,
    Trends,
    Publishing,
    Credentials,
    Alerts,
):
    """Every group at once: reading it validates the whole environment."""


# The groups in the order `mdame config` and the configuration page show them.
GROUPS: tuple[type[_Group], ...] = Settings.__bases__
