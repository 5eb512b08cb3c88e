"""`mdame doctor`: checks a deployment before its first real run.

    mdame doctor [--only GROUP[,GROUP]] [--timeout S] [--min-free-gb N] [--gpu auto|required|skip]

Each check makes one cheap call through the client library the pipeline itself uses, against
the endpoint the pipeline would use (the MDAME_*_URL variables), and prints one row: check,
OK/WARN/FAIL/SKIP, detail. The exit status is 1 when any check FAILs. Groups, in order:

    env           ENV set and valid; the provider set it implies
    database      reachable with the app URL; the ENV it records matches
    migrations    every file of sql/migrations applied, with the SHA-256 the runner recorded
    roles         the app role: not a superuser, no BYPASSRLS, no table writes, RLS on every
                  table with a read policy for it
    gemini        google-genai client.models.get() at MDAME_GEMINI_BASE_URL for each model the
                  active dimensions configure (gemini_text_model, gemini_tts_model): a missing
                  one FAILs naming the YAML field, 429/5xx or a timeout WARN
    edge_tts      edge-tts list_voices() at the voices list beside MDAME_EDGE_TTS_URL; the
                  dimensions' voices are offered (WARN: Gemini TTS would take over)
    youtube       per active account: its stored grant opened, the token refreshed, then
                  channels.list(mine=True) (1 quota unit, not charged to the ledger)
    telegram      getMe at MDAME_TELEGRAM_API_URL; a chat for every active dimension
    redis         PING of MDAME_CELERY_BROKER_URL (and the result backend) when
                  MDAME_GPU_EXECUTOR=celery
    object_store  MDAME_MEDIA_URL: s3 -> HEAD bucket; a local folder -> writable
    gpu           torch.cuda: device, free VRAM. SKIP on a host without an NVIDIA device unless
                  this host generates clips (production visuals in process) or --gpu required
    ffmpeg        libx264 (required); h264_nvenc (reported; required when
                  MDAME_VIDEO_ENCODER=h264_nvenc)
    disk          free bytes under MDAME_HOME (and a local media store): FAIL under
                  --min-free-gb (MDAME_DOCTOR_MIN_FREE_GB, default 10), WARN under twice that

With the offline providers (ENV=dev's default) the provider checks SKIP, naming why, and the
rest runs. Secrets are never printed: every detail goes through a Redactor that masks the
values of the secret variables, the grants and client secrets it opened, bot-token paths and
URL passwords, error messages of the client libraries included.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import json
import logging
import os
import shutil
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import psycopg

from mdame_core import settings
from mdame_domain.doctor import (
    GIB,
    Check,
    Redactor,
    Status,
    disk_verdict,
    display_url,
    edge_voice_list_url,
    exit_code,
    first_line,
    human_bytes,
    migration_problems,
    render_table,
    secret_values,
)

GROUPS = (
    "env",
    "database",
    "migrations",
    "roles",
    "gemini",
    "edge_tts",
    "youtube",
    "telegram",
    "redis",
    "object_store",
    "gpu",
    "ffmpeg",
    "disk",
)
PROVIDER_GROUPS = ("gemini", "edge_tts", "youtube", "telegram")
_NEEDS_DATABASE = ("database", "migrations", "roles", "gpu", *PROVIDER_GROUPS)
# Variables whose values must never be printed (their presence may be).
SECRET_VARS = (
    "GEMINI_API_KEY",
    "YOUTUBE_API_KEY",
    "MDAME_TELEGRAM_BOT_TOKEN",
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
TELEGRAM_TOKEN_VAR = "MDAME_TELEGRAM_BOT_TOKEN"
TELEGRAM_CHAT_VAR = "MDAME_TELEGRAM_CHAT_ID"
MIN_FREE_VAR = "MDAME_DOCTOR_MIN_FREE_GB"
DEFAULT_MIN_FREE_GB = 10.0
# Below this much free VRAM a diffusers engine at fp16 is unlikely to fit (SVD's 14 frames).
MIN_FREE_VRAM = 8 * GIB


@dataclass
class Options:
    only: frozenset[str] = frozenset(GROUPS)
    timeout_s: float = 10.0
    min_free_bytes: int = int(DEFAULT_MIN_FREE_GB * GIB)
    gpu: str = "auto"  # auto | required | skip


@dataclass
class Doctor:
    """The checks, in order; what one learns (ENV, the database, the dimensions) the next uses."""

    options: Options
    redact: Redactor = field(default_factory=Redactor)
    env: str | None = None
    providers: str | None = None  # offline | production | fakes; None: unknown (bad ENV)
    db_ok: bool = False
    dimensions: list[Any] = field(default_factory=list)  # active DimensionConfigs
    dimension_rows: list[Any] = field(default_factory=list)  # mdame_core.state.Dimension
    checks: list[Check] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.redact.add(*secret_values(os.environ, SECRET_VARS))
        for name in URL_VARS:
            with contextlib.suppress(ValueError):
                password = urlsplit(os.environ.get(name, "")).password
                if password:
                    self.redact.add(password)

    # -- running -------------------------------------------------------------------------------
    def add(self, name: str, status: Status, detail: str) -> None:
        self.checks.append(Check(name, status, self.redact(detail)))

    def run(self) -> list[Check]:
        steps: list[tuple[str, Callable[[], None]]] = [
            ("env", self.check_env),
            ("database", self.check_database),
            ("gemini", self.check_gemini),
            ("edge_tts", self.check_edge_tts),
            ("youtube", self.check_youtube),
            ("telegram", self.check_telegram),
            ("redis", self.check_redis),
            ("object_store", self.check_object_store),
            ("gpu", self.check_gpu),
            ("ffmpeg", self.check_ffmpeg),
            ("disk", self.check_disk),
        ]
        with _quiet_libraries():
            for group, step in steps:
                # env and the database run whenever a later check needs what they learn (the
                # provider set; the dimensions and accounts).
                needed = (
                    group in self.options.only
                    or group == "env"
                    or (group == "database" and bool(self.options.only & set(_NEEDS_DATABASE)))
                )
                if not needed:
                    continue
                try:
                    step()
                except Exception as exc:  # a check that broke is a FAIL row, never a traceback
                    self.add(group, Status.FAIL, f"{type(exc).__name__}: {first_line(str(exc))}")
        return [c for c in self.checks if c.group in self.options.only]

    def _provider_skip(self, group: str) -> bool:
        """SKIPs a provider check when the offline providers are in use (or unknown)."""
        if self.providers is None:
            self.add(group, Status.SKIP, "ENV is not valid, so the provider set is unknown")
            return True
        if self.providers == "offline":
            self.add(
                group,
                Status.SKIP,
                "offline providers (MDAME_PROVIDERS=offline, ENV=dev's default): not called",
            )
            return True
        return False

    # -- ENV -----------------------------------------------------------------------------------
    def check_env(self) -> None:
        from mdame_resources.providers.selection import PROVIDERS_VAR, provider_set

        try:
            self.env = settings.mdame_env()
        except settings.SettingsError as exc:
            self.add("env", Status.FAIL, str(exc))
            return
        try:
            self.providers = provider_set()
        except settings.SettingsError as exc:
            self.add("env", Status.FAIL, str(exc))
            return
        if self.env == "prod" and self.providers != "production":
            self.add(
                "env",
                Status.FAIL,
                f"ENV=prod accepts only the production providers, not "
                f"{PROVIDERS_VAR}={self.providers}",
            )
            return
        self.add("env", Status.OK, f"ENV={self.env}, providers={self.providers}")

    # -- the database --------------------------------------------------------------------------
    @contextlib.contextmanager
    def _app_connection(self) -> Iterator[psycopg.Connection]:
        url = settings.database_url("app")
        with psycopg.connect(
            url, autocommit=True, connect_timeout=max(1, int(self.options.timeout_s))
        ) as conn:
            if conn.info.user != settings.APP_ROLE and self.env == "dev":
                # dev may use the owner's login and drop to the app role (settings.database_url).
                conn.execute(f"SET ROLE {settings.APP_ROLE}")
            yield conn

    def check_database(self) -> None:
        try:
            with self._app_connection() as conn:
                where = f"{conn.info.host}:{conn.info.port}/{conn.info.dbname}"
                login = conn.info.user
                if login != settings.APP_ROLE and self.env != "dev":
                    self.add(
                        "database",
                        Status.FAIL,
                        f"{where}: the app URL logs in as {login}, not {settings.APP_ROLE} "
                        "(MDAME_APP_DATABASE_URL)",
                    )
                    return
                if not _exists(conn, "mdame.schema_migrations"):
                    self.add("database", Status.OK, f"{where} reachable as {login}")
                    self.add("migrations", Status.FAIL, "not migrated: run `mdame db migrate`")
                    self.add("roles", Status.SKIP, "not migrated")
                    return
                recorded = None
                if _exists(conn, "mdame.environment"):
                    row = conn.execute("SELECT env FROM mdame.environment").fetchone()
                    recorded = row[0] if row else None
                if self.env and recorded and recorded != self.env:
                    self.add(
                        "database",
                        Status.FAIL,
                        f"{where} belongs to ENV={recorded}; this shell has ENV={self.env}",
                    )
                else:
                    self.add(
                        "database",
                        Status.OK,
                        f"{where} reachable as {login}; ENV={recorded or 'not recorded'}",
                    )
                    self.db_ok = recorded is not None
                self._check_migrations(conn)
                self._check_roles(conn)
                if self.db_ok:
                    self._load_dimensions(conn)
        except (psycopg.Error, settings.SettingsError) as exc:
            self.add("database", Status.FAIL, f"cannot connect: {first_line(str(exc))}")
            self.add("migrations", Status.SKIP, "the database is not reachable")
            self.add("roles", Status.SKIP, "the database is not reachable")

    def _check_migrations(self, conn: psycopg.Connection) -> None:
        from mdame_core.migrate import MigrationError, migration_files

        try:
            files = [(f.name, f.sha256) for f in migration_files()]
        except MigrationError as exc:
            self.add("migrations", Status.FAIL, str(exc))
            return
        rows = conn.execute("SELECT filename, sha256 FROM mdame.schema_migrations").fetchall()
        problems = migration_problems(files, {name: sha for name, sha in rows})
        if problems:
            self.add("migrations", Status.FAIL, "; ".join(problems))
            self.db_ok = False
        else:
            self.add("migrations", Status.OK, f"all {len(files)} applied, checksums match")

    def _check_roles(self, conn: psycopg.Connection) -> None:
        app = settings.APP_ROLE
        problems = []
        row = conn.execute(
            "SELECT rolsuper, rolbypassrls, rolcreaterole FROM pg_roles WHERE rolname = %s",
            (app,),
        ).fetchone()
        if row is None:
            self.add("roles", Status.FAIL, f"role {app} does not exist")
            return
        if row[0]:
            problems.append(f"{app} is a superuser")
        if row[1]:
            problems.append(f"{app} has BYPASSRLS")
        if row[2]:
            problems.append(f"{app} may create roles")
        owner = conn.execute(
            "SELECT pg_has_role(%s, %s, 'MEMBER')", (app, settings.OWNER_ROLE)
        ).fetchone()
        if owner and owner[0]:
            problems.append(f"{app} is a member of {settings.OWNER_ROLE}")
        writable = [
            f"{table} ({privilege})"
            for table, privilege in conn.execute(
                """SELECT c.relname, p.privilege
                     FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                     CROSS JOIN unnest(ARRAY['INSERT','UPDATE','DELETE','TRUNCATE']) p(privilege)
                    WHERE n.nspname = 'mdame' AND c.relkind IN ('r', 'p')
                      AND has_table_privilege(%s, c.oid, p.privilege)
                    ORDER BY 1, 2""",
                (app,),
            )
        ]
        if writable:
            problems.append(f"{app} may write tables directly: {', '.join(writable)}")
        no_rls = [
            r[0]
            for r in conn.execute(
                """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                    WHERE n.nspname = 'mdame' AND c.relkind IN ('r', 'p')
                      AND NOT (c.relrowsecurity AND EXISTS (
                          SELECT FROM pg_policies p
                           WHERE p.schemaname = 'mdame' AND p.tablename = c.relname
                             AND %s = ANY (p.roles)))
                    ORDER BY 1""",
                (app,),
            )
        ]
        if no_rls:
            problems.append(f"row-level security off or no {app} policy: {', '.join(no_rls)}")
        if problems:
            self.add("roles", Status.FAIL, "; ".join(problems))
        else:
            self.add(
                "roles",
                Status.OK,
                f"{app}: not a superuser, no BYPASSRLS, reads only, RLS on every table",
            )

    def _load_dimensions(self, conn: psycopg.Connection) -> None:
        from mdame_core.state import Dimension
        from mdame_domain.dimensions import dimension_from_json

        rows = conn.execute(
            "SELECT id, slug, title, config, active FROM mdame.dimensions WHERE active "
            "ORDER BY slug"
        ).fetchall()
        self.dimension_rows = [Dimension(*row) for row in rows]
        for row in self.dimension_rows:
            with contextlib.suppress(Exception):  # a config of another version: defaults apply
                self.dimensions.append(dimension_from_json(row.config))

    # -- Gemini --------------------------------------------------------------------------------
    def _gemini_models(self) -> dict[str, list[tuple[str, str]]]:
        """Each model the active dimensions configure -> (dimension, YAML field) pairs; with no
        dimension, the defaults (mdame_domain/paid_calls.py) under the dimension '' ."""
        from mdame_domain.paid_calls import DEFAULT_TEXT_MODEL, DEFAULT_TTS_MODEL

        needed: dict[str, list[tuple[str, str]]] = {}
        configured = [
            (dim.slug, dim.gemini_text_model, dim.gemini_tts_model) for dim in self.dimensions
        ] or [("", DEFAULT_TEXT_MODEL, DEFAULT_TTS_MODEL)]
        for slug, text_model, tts_model in configured:
            needed.setdefault(text_model, []).append((slug, "gemini_text_model"))
            needed.setdefault(tts_model, []).append((slug, "gemini_tts_model"))
        return needed

    def check_gemini(self) -> None:
        """models.get per configured model: one row each (`gemini:<model>`); a problem of the
        whole service (no key, a refused key, nothing listening) is one `gemini` row."""
        if self._provider_skip("gemini"):
            return
        from google.genai import errors

        from mdame_resources.providers.gemini import BASE_URL_ENV, make_client

        key = os.environ.get("GEMINI_API_KEY", "")
        if not key:
            self.add("gemini", Status.FAIL, "GEMINI_API_KEY is not set")
            return
        base = os.environ.get(BASE_URL_ENV) or "https://generativelanguage.googleapis.com"
        where = display_url(base)
        client = make_client(key, timeout_s=self.options.timeout_s)
        for model, users in sorted(self._gemini_models().items()):
            row = f"gemini:{model}"
            try:
                client.models.get(model=model)
            except errors.APIError as exc:
                said = f"HTTP {exc.code} {exc.status}: {first_line(exc.message or '')}"
                if _key_refused(exc):
                    self.add(
                        "gemini",
                        Status.FAIL,
                        f"{where} refused GEMINI_API_KEY ({said}): set it to a valid key of "
                        "a project with the Gemini API enabled",
                    )
                    return
                if exc.code == 429 or (exc.code or 0) >= 500:
                    self.add(row, Status.WARN, f"{where} answered {said} (transient: try again)")
                else:
                    self.add(row, Status.FAIL, f"{where} answered {said}; {_model_fix(users)}")
                continue
            except _http_errors("TimeoutException") as exc:
                self.add(
                    row,
                    Status.WARN,
                    f"{where}: no answer within {self.options.timeout_s}s "
                    f"({type(exc).__name__}, transient: try again)",
                )
                continue
            except _http_errors("TransportError") as exc:
                self.add("gemini", Status.FAIL, f"{where} not reachable ({type(exc).__name__})")
                return
            self.add(row, Status.OK, f"offered at {where}; {_model_users(users)}")

    # -- Edge-TTS ------------------------------------------------------------------------------
    def check_edge_tts(self) -> None:
        if self._provider_skip("edge_tts"):
            return
        import aiohttp
        import edge_tts.constants
        import edge_tts.voices

        from mdame_resources.providers.voice import EDGE_URL_ENV

        wss = os.environ.get(EDGE_URL_ENV, "")
        if wss and "?" not in wss:
            self.add("edge_tts", Status.FAIL, f"{EDGE_URL_ENV} must contain '?' (a query string)")
            return
        try:
            url = edge_voice_list_url(wss) if wss else edge_tts.constants.VOICE_LIST
        except ValueError as exc:
            self.add("edge_tts", Status.FAIL, f"{EDGE_URL_ENV}: {exc}")
            return
        where = display_url(url)
        _no_proxy_for_local(url)

        async def voices() -> list[Any]:
            with _EDGE_LIST_LOCK:
                # list_voices reads the module's VOICE_LIST; point it here for this call only.
                edge_tts.voices.VOICE_LIST = url
                try:
                    async with asyncio.timeout(self.options.timeout_s):
                        return list(await edge_tts.voices.list_voices())
                finally:
                    edge_tts.voices.VOICE_LIST = edge_tts.constants.VOICE_LIST

        try:
            listed = asyncio.run(voices())
        except aiohttp.ClientResponseError as exc:
            self.add("edge_tts", Status.FAIL, f"{where} answered HTTP {exc.status}")
            return
        except TimeoutError:
            self.add(
                "edge_tts", Status.FAIL, f"{where}: no answer within {self.options.timeout_s}s"
            )
            return
        except aiohttp.ClientError as exc:
            self.add("edge_tts", Status.FAIL, f"{where} not reachable ({type(exc).__name__})")
            return
        names = {str(v.get("ShortName")) for v in listed}
        missing = sorted(
            f"{d.tts.edge_voice} ({d.slug})"
            for d in self.dimensions
            if d.tts.edge_voice not in names
        )
        if missing:
            self.add(
                "edge_tts",
                Status.WARN,
                f"{len(names)} voices at {where}, but not {', '.join(missing)}: those "
                "dimensions would fall back to Gemini TTS",
            )
            return
        self.add("edge_tts", Status.OK, f"{len(names)} voices at {where}")

    # -- YouTube -------------------------------------------------------------------------------
    def check_youtube(self) -> None:
        if self._provider_skip("youtube"):
            return
        if not self.db_ok:
            self.add(
                "youtube", Status.SKIP, "the database is not ready, so the accounts are unknown"
            )
            return
        if not self.dimension_rows:
            self.add(
                "youtube",
                Status.WARN,
                "no active dimension in the database yet (the registry syncs on the first run: "
                "`make demo` or the daemon): no account to check",
            )
            return
        from mdame_core.state import StateStore

        with StateStore(env=self.env, pool_max=1, connect_timeout_s=self.options.timeout_s) as st:
            found = False
            for dim in self.dimension_rows:
                for account in st.list_accounts(dim.slug, active_only=True):
                    if account.platform != "youtube":
                        continue
                    found = True
                    name = f"youtube:{dim.slug}/{account.handle}"
                    try:
                        status, detail = self._youtube_account(st, dim.slug, account)
                    except Exception as exc:
                        status = Status.FAIL
                        detail = f"{type(exc).__name__}: {first_line(str(exc))}"
                    self.add(name, status, detail)
            if not found:
                self.add("youtube", Status.FAIL, "no active YouTube account in the database")

    def _youtube_account(self, st: Any, slug: str, account: Any) -> tuple[Status, str]:
        from mdame_cli.accounts import CLIENT_SECRETS_VAR, default_key_file
        from mdame_domain.channel import ChannelError
        from mdame_domain.credentials import (
            CredentialError,
            associated_data,
            key_grace_s,
            load_master_keys,
            open_stored_grant,
        )
        from mdame_resources.providers.youtube_api import (
            GOOGLE_TOKEN_URI,
            ROOT_URL_VAR,
            TOKEN_URI_VAR,
            GrantRevoked,
            TransferInterrupted,
            YouTubeApi,
        )

        reconnect = f"run `mdame accounts connect {slug} --account {account.handle}`"
        if st.account_status(account.id).needs_reauth:
            return Status.FAIL, f"marked needs_reauth: {reconnect}"
        stored = st.account_grant(account.id)
        if stored is None:
            return Status.FAIL, f"no stored grant: {reconnect}"
        secrets_file = os.environ.get(CLIENT_SECRETS_VAR, "")
        if not secrets_file:
            return Status.FAIL, f"{CLIENT_SECRETS_VAR} is not set"
        try:
            raw = json.loads(Path(secrets_file).read_text())
            app = raw.get("installed") or raw.get("web") or {}
            client_id, client_secret = str(app["client_id"]), str(app["client_secret"])
        except (OSError, ValueError, KeyError, AttributeError) as exc:
            return (
                Status.FAIL,
                f"{CLIENT_SECRETS_VAR}: unreadable OAuth client ({type(exc).__name__})",
            )
        self.redact.add(client_secret)
        try:
            # As the publisher opens it: a key a rotation replaced works for the grace period.
            grant = open_stored_grant(
                load_master_keys(default_key_file()),
                associated_data(str(self.env), "youtube", account.handle),
                stored.grant(),
                key_grace_s(),
            )
        except (CredentialError, OSError) as exc:
            return Status.FAIL, f"the stored grant cannot be opened: {first_line(str(exc))}"
        refresh_token = str(grant.get("refresh_token", ""))
        self.redact.add(refresh_token)
        where = display_url(os.environ.get(ROOT_URL_VAR) or "https://youtube.googleapis.com")
        api = YouTubeApi(refresh_token, client_id, client_secret, timeout_s=self.options.timeout_s)
        del refresh_token, grant
        try:
            uploads = api.uploads_playlist()  # channels.list(mine=True): refreshes the token first
        except GrantRevoked:
            return Status.FAIL, f"token refresh refused (invalid_grant): {reconnect}"
        except TransferInterrupted as exc:
            return Status.FAIL, f"token refresh failed ({first_line(str(exc))})"
        except ChannelError as exc:
            return Status.FAIL, f"channels.list at {where} answered HTTP {exc.status} {exc.reason}"
        except OSError as exc:
            token_where = display_url(os.environ.get(TOKEN_URI_VAR) or GOOGLE_TOKEN_URI)
            return Status.FAIL, (
                f"not reachable: {where} or the token endpoint {token_where} ({type(exc).__name__})"
            )
        except (IndexError, KeyError) as exc:
            return (
                Status.FAIL,
                f"channels.list at {where}: unexpected answer ({type(exc).__name__})",
            )
        return Status.OK, f"token refreshed; channels.list answers (uploads playlist {uploads})"

    # -- Telegram ------------------------------------------------------------------------------
    def check_telegram(self) -> None:
        """getMe through the alerts' own client (mdame_resources.notify.TelegramNotifier), then
        a chat for every active dimension and for global alerts."""
        if self._provider_skip("telegram"):
            return
        from mdame_resources.notify import (
            NotifyConfigError,
            TelegramError,
            TelegramNotifier,
            TelegramUnauthorized,
        )

        token = os.environ.get(TELEGRAM_TOKEN_VAR, "")
        if not token:
            self.add(
                "telegram",
                Status.FAIL,
                f"{TELEGRAM_TOKEN_VAR} is not set: alerts and reports cannot reach Telegram",
            )
            return
        self.redact.add(token)
        # One try: a doctor reports an outage, it does not wait one out.
        notifier = TelegramNotifier(
            timeout_s=self.options.timeout_s, server_retries=0, max_wait_s=0
        )
        where = display_url(notifier.base_url())
        try:
            bot = notifier.get_me()
        except TelegramUnauthorized:
            self.add(
                "telegram",
                Status.FAIL,
                f"getMe at {where} answered HTTP 401 Unauthorized (the bot token was refused)",
            )
            return
        except TelegramError as exc:
            what = (
                f"not reachable ({exc.description})"
                if exc.status == 0
                else f"answered HTTP {exc.status} {exc.description}"
            )
            self.add("telegram", Status.FAIL, f"getMe at {where} {what}")
            return
        unrouted = []
        for row in self.dimension_rows:
            try:
                notifier.chat_for(row.slug)
            except NotifyConfigError:
                unrouted.append(row.slug)
        name = f"bot @{bot.get('username')} at {where}"
        if unrouted:
            self.add(
                "telegram",
                Status.FAIL,
                f"{name}, but no chat for {', '.join(unrouted)}: set {TELEGRAM_CHAT_VAR} or "
                "the dimension's alerts.telegram_chat",
            )
            return
        try:
            notifier.chat_for(None)
        except NotifyConfigError:
            self.add(
                "telegram",
                Status.WARN,
                f"{name}; no global chat ({TELEGRAM_CHAT_VAR}): alerts of no dimension are "
                "not delivered",
            )
            return
        self.add("telegram", Status.OK, name)

    # -- Redis ---------------------------------------------------------------------------------
    def check_redis(self) -> None:
        from mdame_assets.executors import CELERY_BACKEND_ENV, CELERY_BROKER_ENV, executor_name

        try:
            executor = executor_name()
        except ValueError as exc:
            self.add("redis", Status.FAIL, str(exc))
            return
        if executor != "celery":
            self.add("redis", Status.SKIP, f"MDAME_GPU_EXECUTOR={executor}: no Celery broker")
            return
        import redis

        broker = os.environ.get(CELERY_BROKER_ENV, "")
        if not broker:
            self.add(
                "redis", Status.FAIL, f"MDAME_GPU_EXECUTOR=celery, but {CELERY_BROKER_ENV} is unset"
            )
            return
        urls = {"broker": broker}
        backend = os.environ.get(CELERY_BACKEND_ENV, "")
        if backend and backend != broker:
            urls["backend"] = backend
        for role, url in urls.items():
            where = display_url(url)
            try:
                client = redis.Redis.from_url(
                    url,
                    socket_connect_timeout=self.options.timeout_s,
                    socket_timeout=self.options.timeout_s,
                )
                client.ping()
                client.close()
            except redis.AuthenticationError:
                self.add("redis", Status.FAIL, f"{role} {where} refused the password")
                return
            except redis.RedisError as exc:
                self.add(
                    "redis",
                    Status.FAIL,
                    f"{role} {where} not reachable ({type(exc).__name__}: {first_line(str(exc))})",
                )
                return
        self.add(
            "redis",
            Status.OK,
            "; ".join(f"{r} {display_url(u)} answers PING" for r, u in urls.items()),
        )

    # -- the object store ----------------------------------------------------------------------
    def check_object_store(self) -> None:
        from mdame_assets.executors import executor_name
        from mdame_domain.media_url import (
            MEDIA_URL_ENV,
            LocalMediaUrl,
            MediaUrlError,
            parse_media_url,
        )
        from mdame_resources.media import media_root

        try:
            parsed = parse_media_url(os.environ.get(MEDIA_URL_ENV, ""))
        except MediaUrlError as exc:
            self.add("object_store", Status.FAIL, f"{MEDIA_URL_ENV}: {exc}")
            return
        if isinstance(parsed, LocalMediaUrl):
            root = Path(parsed.path) if parsed.path else media_root()
            try:
                root.mkdir(parents=True, exist_ok=True)
                with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
                    pass
            except OSError as exc:
                self.add(
                    "object_store",
                    Status.FAIL,
                    f"local folder {root} not writable ({exc.strerror})",
                )
                return
            with contextlib.suppress(ValueError):
                if executor_name() in ("celery", "k8s"):
                    self.add(
                        "object_store",
                        Status.WARN,
                        f"local folder {root} with MDAME_GPU_EXECUTOR={executor_name()}: workers "
                        "on other hosts cannot reach it (use an s3:// MDAME_MEDIA_URL)",
                    )
                    return
            self.add("object_store", Status.OK, f"local folder {root} writable")
            return
        self._check_bucket(parsed)

    def _check_bucket(self, url: Any) -> None:
        import boto3  # type: ignore[import-untyped]
        from botocore.config import Config  # type: ignore[import-untyped]
        from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError  # type: ignore[import-untyped]

        where = f"s3://{url.bucket}" + (f" at {url.endpoint_url}" if url.endpoint_url else "")
        config = Config(
            s3={"addressing_style": url.addressing_style},
            retries={"max_attempts": 1, "mode": "standard"},
            connect_timeout=self.options.timeout_s,
            read_timeout=self.options.timeout_s,
        )
        client = boto3.session.Session().client(
            "s3", endpoint_url=url.endpoint_url, region_name=url.region, config=config
        )
        try:
            client.head_bucket(Bucket=url.bucket)
        except NoCredentialsError:
            self.add("object_store", Status.FAIL, f"{where}: no AWS credentials found")
            return
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", ""))
            if code in ("404", "NoSuchBucket", "NotFound"):
                self.add(
                    "object_store", Status.FAIL, f"bucket {url.bucket} does not exist ({where})"
                )
            elif code in ("403", "AccessDenied", "Forbidden"):
                self.add("object_store", Status.FAIL, f"{where}: access denied (HTTP 403)")
            else:
                self.add("object_store", Status.FAIL, f"{where}: HEAD bucket failed ({code})")
            return
        except BotoCoreError as exc:
            self.add("object_store", Status.FAIL, f"{where} not reachable ({type(exc).__name__})")
            return
        self.add("object_store", Status.OK, f"{where}: bucket reachable (HEAD bucket)")

    # -- the GPU -------------------------------------------------------------------------------
    def _gpu_needed(self) -> tuple[bool, str]:
        from mdame_assets.executors import executor_name

        if self.options.gpu == "required":
            return True, "--gpu required"
        if self.providers != "production":
            return False, f"{self.providers or 'unknown'} providers make procedural clips"
        try:
            executor = executor_name()
        except ValueError:
            executor = "?"
        if executor in ("celery", "k8s"):
            return False, f"MDAME_GPU_EXECUTOR={executor}: clips are made on the GPU workers"
        engines = sorted({d.visuals.engine for d in self.dimensions}) or ["svd"]
        return True, f"diffusers ({', '.join(engines)}) generates on this host"

    def check_gpu(self) -> None:
        if self.options.gpu == "skip":
            self.add("gpu", Status.SKIP, "--gpu skip")
            return
        needed, why = self._gpu_needed()
        device = Path("/dev/nvidiactl").exists() or shutil.which("nvidia-smi") is not None
        if not device:
            if needed:
                # No driver device node and no nvidia-smi: torch could not see a GPU either.
                self.add("gpu", Status.FAIL, f"no NVIDIA device on this host; needed: {why}")
            else:
                self.add("gpu", Status.SKIP, f"no NVIDIA device on this host, none needed ({why})")
            return
        try:
            import torch
        except ImportError:
            self.add("gpu", Status.FAIL if needed else Status.WARN, "torch is not installed")
            return
        if not torch.cuda.is_available():
            status = Status.FAIL if needed else Status.WARN
            build = f"torch {torch.__version__}, CUDA build {torch.version.cuda or 'none'}"
            self.add("gpu", status, f"torch.cuda.is_available() is False ({build}); {why}")
            return
        free, total = torch.cuda.mem_get_info()
        detail = (
            f"{torch.cuda.get_device_name(0)}: {human_bytes(free)} free of {human_bytes(total)} "
            f"(torch {torch.__version__}, CUDA {torch.version.cuda}, "
            f"{torch.cuda.device_count()} device(s))"
        )
        if needed and free < MIN_FREE_VRAM:
            self.add("gpu", Status.WARN, f"{detail}; under {human_bytes(MIN_FREE_VRAM)} free")
            return
        self.add("gpu", Status.OK, detail)

    # -- ffmpeg --------------------------------------------------------------------------------
    def check_ffmpeg(self) -> None:
        from mdame_domain.encoders import ENCODER_ENV, listed_encoders, nvenc_usable
        from mdame_domain.mediatools import MediaToolError

        try:
            names = listed_encoders()
        except (MediaToolError, OSError) as exc:
            self.add("ffmpeg", Status.FAIL, f"`ffmpeg -encoders` failed: {first_line(str(exc))}")
            return
        if "libx264" in names:
            self.add("ffmpeg:libx264", Status.OK, "listed (the CPU encoder every render can use)")
        else:
            self.add("ffmpeg:libx264", Status.FAIL, "this ffmpeg has no libx264 encoder")
        requested = (os.environ.get(ENCODER_ENV) or "auto").strip().lower()
        required = requested == "h264_nvenc"
        if "h264_nvenc" not in names:
            self.add(
                "ffmpeg:h264_nvenc",
                Status.FAIL if required else Status.SKIP,
                "not in this ffmpeg build" + (f" ({ENCODER_ENV}=h264_nvenc)" if required else ""),
            )
        elif nvenc_usable():
            self.add("ffmpeg:h264_nvenc", Status.OK, "listed, and a test encode works on this host")
        else:
            self.add(
                "ffmpeg:h264_nvenc",
                Status.FAIL if required else Status.SKIP,
                "listed, but no CUDA device here can encode with it"
                + (f" ({ENCODER_ENV}=h264_nvenc)" if required else ": renders use libx264"),
            )

    # -- disk ----------------------------------------------------------------------------------
    def check_disk(self) -> None:
        from mdame_domain.media_url import (
            MEDIA_URL_ENV,
            LocalMediaUrl,
            MediaUrlError,
            parse_media_url,
        )
        from mdame_resources.media import media_root

        places = {"home": settings.mdame_home()}
        with contextlib.suppress(MediaUrlError):
            parsed = parse_media_url(os.environ.get(MEDIA_URL_ENV, ""))
            if isinstance(parsed, LocalMediaUrl):
                places["media"] = Path(parsed.path) if parsed.path else media_root()
        seen: set[int] = set()
        for what, path in places.items():
            existing = _existing_parent(path)
            device = existing.stat().st_dev
            if device in seen:
                continue  # the same filesystem: one row
            seen.add(device)
            free = shutil.disk_usage(existing).free
            status = disk_verdict(free, self.options.min_free_bytes)
            warn = ", WARN under twice it" if status is Status.WARN else ""
            self.add(
                f"disk:{what}",
                status,
                f"{human_bytes(free)} free under {path} (threshold "
                f"{human_bytes(self.options.min_free_bytes)}{warn})",
            )


_EDGE_LIST_LOCK = threading.Lock()


def _key_refused(exc: Any) -> bool:
    """401/403, or Google's 400 for a malformed key (INVALID_ARGUMENT, "API key not valid")."""
    return exc.code in (401, 403) or (exc.code == 400 and "api key" in (exc.message or "").lower())


def _model_users(users: list[tuple[str, str]]) -> str:
    """Who configures a model: `tech (gemini_text_model), science (gemini_tts_model)`."""
    if all(slug == "" for slug, _ in users):
        fields = sorted({f for _, f in users})
        return f"the default {' and '.join(fields)} (no active dimension)"
    return "used by " + ", ".join(f"{slug} ({f})" for slug, f in users if slug)


def _model_fix(users: list[tuple[str, str]]) -> str:
    """The YAML field to change, and where: a model name is a dimension's setting."""
    if all(slug == "" for slug, _ in users):
        fields = sorted({f for _, f in users})
        return (
            f"it is the default {' and '.join(fields)}: set {' / '.join(fields)} in the "
            "dimensions' YAML files to a model the API offers"
        )
    where = ", ".join(f"{f} in dimensions/{slug}.yaml" for slug, f in users if slug)
    return f"set {where} to a model the API offers"


def _http_errors(name: str) -> tuple[type[BaseException], ...]:
    """httpx's exception `name`, and httpx2's: google-genai talks through either (as
    mdame_resources/providers/gemini.py knows)."""
    found = []
    for module in ("httpx", "httpx2"):
        with contextlib.suppress(ImportError):
            found.append(getattr(importlib.import_module(module), name))
    return tuple(found)


def _exists(conn: psycopg.Connection, relation: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (relation,)).fetchone()
    return bool(row and row[0])


def _existing_parent(path: Path) -> Path:
    path = path.resolve()
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _no_proxy_for_local(url: str) -> None:
    """A local server is never behind the proxy (aiohttp honours proxy variables)."""
    host = urlsplit(url).hostname or ""
    if host in ("127.0.0.1", "localhost", "::1"):
        current = os.environ.get("NO_PROXY", "")
        if host not in current.split(","):
            os.environ["NO_PROXY"] = ",".join(filter(None, [current, host]))


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
    return Doctor(options or Options()).run()


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
        raw = os.environ.get(MIN_FREE_VAR, "")
        try:
            min_free_gb = float(raw) if raw else DEFAULT_MIN_FREE_GB
        except ValueError:
            raise SystemExit(
                f"mdame: error: {MIN_FREE_VAR} must be a number, got {raw!r}"
            ) from None
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
