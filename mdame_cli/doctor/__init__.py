"""`mdame doctor`: checks a deployment before its first real run.

    mdame doctor [--only GROUP[,GROUP]] [--timeout S] [--min-free-gb N] [--gpu auto|required|skip]

Each check makes one cheap call through the client library the pipeline itself uses, against
the endpoint the pipeline would use (the MDAME_*_URL variables), and prints one row: check,
OK/WARN/FAIL/SKIP, detail. The exit status is 1 when any check FAILs. A provider's check is its
own `health_check`, run on the provider as the definitions build it (providers.py). Groups, in
order, each from one module of this package (CHECKS below):

    env           ENV set and valid; the provider set it implies
    database      reachable with the app URL; the ENV it records matches
    migrations    every file of sql/migrations applied, with the SHA-256 the runner recorded
    roles         the app role: not a superuser, no BYPASSRLS, no table writes, RLS on every
                  table with a read policy for it
    trends        one fetch of each trend source the active dimensions list, through the trend
                  reader's client, uncached: a missing or refused YOUTUBE_API_KEY FAILs, a
                  source down (no answer, 429, 5xx) WARNs, any other unusable answer FAILs
    gemini        google-genai client.models.get() at MDAME_GEMINI_BASE_URL for each model the
                  active dimensions configure (gemini_text_model, gemini_tts_model): a missing
                  one FAILs naming the YAML field, 429/5xx or a timeout WARN
    safety        the safety classifier: models.get of each gemini_text_model with its key; a
                  model the gemini rows asked with the same key and endpoint is not asked again
    generated     the generated visuals engine: models.get per image model the active
                  dimensions' chains use (visuals.generated.model), and its price per image
    diffusers     where an active dimension's visuals.chain has diffusers: each model folder
                  its visuals.engine needs under MDAME_MODEL_DIR, loadable offline (the index
                  or config JSON, its component folders, weights); missing names
                  `mdame models pull`
    relevance     the relevance judge: models.get per judge model (visuals.relevance.model)
    stock         one search of 3 results per stock source with a key (MDAME_PEXELS_API_KEY,
                  MDAME_PIXABAY_API_KEY) at MDAME_PEXELS_URL / MDAME_PIXABAY_URL; a source
                  without a key WARNs when a dimension's chain has stock
    edge_tts      edge-tts list_voices() at the voices list beside MDAME_EDGE_TTS_URL; the
                  dimensions' voices are offered (WARN: Gemini TTS would take over)
    youtube       per active account: its stored grant opened, the token refreshed, then
                  channels.list(mine=True) (1 quota unit, not charged to the ledger)
    tiktok        the app's client key and secret set (MDAME_TIKTOK_CLIENT_KEY/SECRET); per
                  active account, under its dimension's pipeline lock (a run holding it:
                  WARN): its grant opened, the token refreshed (the rotated refresh token
                  stored), creator_info (scope video.publish) and one video list entry
                  (video.list). A refused grant names `mdame accounts connect`; nothing is
                  marked
    instagram     per active account, under the same lock: its long-lived token opened, `me`
                  and the account's content_publishing_limit
                  (instagram_business_content_publish; the limit reached WARNs)
    telegram      getMe at MDAME_TELEGRAM_API_URL; a chat for every active dimension
    redis         PING of MDAME_CELERY_BROKER_URL (and the result backend) when
                  MDAME_GPU_EXECUTOR=celery
    run_servers   each run server of MDAME_RUN_SERVERS answers as its location (unreachable:
                  WARN, its code server spawns the runs)
    object_store  MDAME_MEDIA_URL: s3 -> HEAD bucket; a local folder -> writable
    gpu           torch.cuda: device, free VRAM. SKIP on a host without an NVIDIA device unless
                  this host generates clips (production visuals in process) or --gpu required
    ffmpeg        libx264 (required); h264_nvenc (reported; required when
                  MDAME_VIDEO_ENCODER=h264_nvenc)
    disk          free bytes under MDAME_HOME (and a local media store): FAIL under
                  --min-free-gb (MDAME_DOCTOR_MIN_FREE_GB, default 10), WARN under twice that

With the offline providers (ENV=dev's default) the provider checks SKIP, naming why, and the
rest runs. Secrets are never printed: a provider's check masks the secrets it reads (its key,
the grants and client secrets it opens), and every detail then goes through a Redactor that
masks the values of the secret variables, bot-token paths and URL passwords, error messages of
the client libraries included."""

from __future__ import annotations

import argparse
import contextlib
import logging
import warnings
from collections.abc import Callable, Iterator
from typing import Any

from mdame_cli.doctor import (
    broker,
    database,
    disk,
    environment,
    ffmpeg,
    gpu,
    providers,
    run_servers,
    store,
)
from mdame_cli.doctor.context import (
    DEFAULT_MIN_FREE_GB,
    GROUPS,
    MIN_FREE_VAR,
    PROVIDER_GROUPS,
    Doctor,
    Options,
)
from mdame_core import settings
from mdame_domain.doctor import GIB, Check, Status, exit_code, first_line, render_table

# The registry: each step, in order, under the group that selects it (database also writes the
# migrations and roles rows).
CHECKS: tuple[tuple[str, Callable[[Doctor], None]], ...] = (
    ("env", environment.check_env),
    ("database", database.check_database),
    ("trends", providers.check_trends),
    ("gemini", providers.check_gemini),
    ("safety", providers.check_safety),
    ("generated", providers.check_generated),
    ("diffusers", providers.check_diffusers),
    ("relevance", providers.check_relevance),
    ("stock", providers.check_stock),
    ("edge_tts", providers.check_edge_tts),
    ("youtube", providers.check_youtube),
    ("tiktok", providers.check_tiktok),
    ("instagram", providers.check_instagram),
    ("telegram", providers.check_telegram),
    ("redis", broker.check_redis),
    ("run_servers", run_servers.check_run_servers),
    ("object_store", store.check_object_store),
    ("gpu", gpu.check_gpu),
    ("ffmpeg", ffmpeg.check_ffmpeg),
    ("disk", disk.check_disk),
)
_NEEDS_DATABASE = ("database", "migrations", "roles", "gpu", *PROVIDER_GROUPS)


def run_checks(doctor: Doctor) -> list[Check]:
    """Every step the selected groups need, in order; the selected groups' rows."""
    options = doctor.options
    with _quiet_libraries():
        for group, step in CHECKS:
            # env and the database run whenever a later check needs what they learn (the
            # provider set; the dimensions and accounts).
            needed = (
                group in options.only
                or group == "env"
                or (group == "database" and bool(options.only & set(_NEEDS_DATABASE)))
            )
            if not needed:
                continue
            try:
                step(doctor)
            except Exception as exc:  # a check that broke is a FAIL row, never a traceback
                doctor.add(group, Status.FAIL, f"{type(exc).__name__}: {first_line(str(exc))}")
    return [c for c in doctor.checks if c.group in options.only]


@contextlib.contextmanager
def _quiet_libraries() -> Iterator[None]:
    """Client libraries' own log lines and warnings could carry a URL with a key: the table is
    the only output."""
    previous = logging.root.manager.disable
    logging.disable(logging.CRITICAL)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        logging.disable(previous)


def run_doctor(options: Options | None = None) -> list[Check]:
    """Every selected check, in order (tests call this; the command prints it)."""
    return run_checks(Doctor(options or Options()))


def _options(args: argparse.Namespace) -> Options:
    only = frozenset(GROUPS)
    if args.only:
        only = frozenset(g.strip() for g in args.only.split(",") if g.strip())
        unknown = sorted(only - set(GROUPS))
        if unknown:
            raise SystemExit(
                f"mdame: error: unknown check group {', '.join(unknown)} "
                f"(known: {', '.join(GROUPS)})"
            )
    min_free_gb = args.min_free_gb
    if min_free_gb is None:
        min_free_gb = float(settings.get(MIN_FREE_VAR))  # a bad value was refused at start-up
    return Options(
        only=only,
        timeout_s=args.timeout,
        min_free_bytes=int(min_free_gb * GIB),
        gpu=args.gpu,
    )


def doctor(args: argparse.Namespace) -> int:
    checks = run_doctor(_options(args))
    print(render_table(checks))
    return exit_code(checks)


def add_parser(groups: Any) -> None:
    parser = groups.add_parser(
        "doctor", help="check a deployment before the first real run (exit 1 on a FAIL)"
    )
    parser.add_argument(
        "--only", help=f"comma-separated check groups (default all: {', '.join(GROUPS)})"
    )
    parser.add_argument(
        "--timeout", type=float, default=10.0, help="seconds per network call (default 10)"
    )
    parser.add_argument(
        "--min-free-gb",
        type=float,
        default=None,
        help=f"free disk below this FAILs (default ${MIN_FREE_VAR}, else {DEFAULT_MIN_FREE_GB:g})",
    )
    parser.add_argument(
        "--gpu",
        choices=("auto", "required", "skip"),
        default="auto",
        help="auto: required where this host makes clips; required: a GPU worker host",
    )
    parser.set_defaults(func=doctor)


__all__ = ["CHECKS", "GROUPS", "Doctor", "Options", "add_parser", "run_doctor"]
