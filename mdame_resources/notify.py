"""Notifiers: where alerts and reports go. Telegram's Bot API in production, a file under the
outbox offline.

`send_message(dimension, text)` and `send_photo(dimension, png, caption)` address a dimension
(its chat: `alerts.telegram_chat` in its YAML) or, with None or a dimension that names no chat,
the global chat MDAME_TELEGRAM_CHAT_ID.

The bot token is part of every Bot API URL (`/bot<token>/sendMessage`), so it must never reach a
log line, an exception or Dagster metadata: errors raised here are built from the status and
Telegram's description only, outside the httpx exception's context (whose message holds the
URL), and the `httpx` logger's request lines are redacted.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, ClassVar

import dagster as dg
import httpx

from mdame_core import settings
from mdame_core.settings import dimensions_dir, mdame_home
from mdame_domain.dimensions import SLUG_PATTERN, DimensionConfigError, load_dimension_file
from mdame_domain.doctor import Redactor, Status, display_url
from mdame_domain.telegram_text import cut_caption, split_message
from mdame_resources.health import Health, HealthScope, resolved
from mdame_resources.providers.base import ProviderResource
from mdame_resources.providers.http_api import http_client

API_URL_VAR = "MDAME_TELEGRAM_API_URL"
TOKEN_VAR = "MDAME_TELEGRAM_BOT_TOKEN"
CHAT_VAR = "MDAME_TELEGRAM_CHAT_ID"
DEFAULT_API_URL = "https://api.telegram.org"
GLOBAL = "_global"  # the outbox file of alerts that name no dimension

_TOKEN_IN_URL = re.compile(r"/bot[^/\s]+/")
log = logging.getLogger(__name__)


class _RedactBotToken(logging.Filter):
    """httpx logs each request's URL at INFO; the Bot API's URLs carry the token."""

    def filter(self, record: logging.LogRecord) -> bool:
        if record.args:
            record.args = tuple(
                _TOKEN_IN_URL.sub("/bot<redacted>/", str(a)) if "/bot" in str(a) else a
                for a in (record.args if isinstance(record.args, tuple) else (record.args,))
            )
        if isinstance(record.msg, str) and "/bot" in record.msg:
            record.msg = _TOKEN_IN_URL.sub("/bot<redacted>/", record.msg)
        return True


for _name in ("httpx", "httpcore"):
    if not any(isinstance(f, _RedactBotToken) for f in logging.getLogger(_name).filters):
        logging.getLogger(_name).addFilter(_RedactBotToken())


class NotifyError(RuntimeError):
    """A notification was not delivered. The message never holds the bot token."""


class NotifyConfigError(NotifyError):
    """Nothing says where to send (no chat), or how (no token)."""


class TelegramError(NotifyError):
    """Telegram answered with an error, or could not be reached (status 0)."""

    def __init__(self, method: str, status: int, description: str) -> None:
        super().__init__(f"Telegram {method}: {status or 'unreachable'}: {description}")
        self.method = method
        self.status = status
        self.description = description


class TelegramUnauthorized(TelegramError):
    """401: the bot token was refused (revoked, or a typo)."""


class NotifierResource(ProviderResource):
    """Where alerts and reports go (abstract: TelegramNotifier, OutboxNotifier)."""

    def send_message(self, dimension: str | None, text: str) -> None:
        """Delivers `text` (several messages when it is long) or raises NotifyError."""
        raise NotImplementedError(f"{self.provider_name} does not implement send_message")

    def send_photo(self, dimension: str | None, png: bytes, caption: str) -> None:
        """Delivers one picture with its caption (cut to Telegram's limit) or raises."""
        raise NotImplementedError(f"{self.provider_name} does not implement send_photo")


class TelegramNotifier(NotifierResource):
    """The Bot API through httpx. A 429 waits its retry_after (at most max_wait_s in all) and
    retries; a 5xx or a connection failure is retried `server_retries` times with backoff; a
    400 or 401 raises at once. Retries may repeat a message whose answer was lost: alerts are
    delivered at least once."""

    bot_token: str = ""  # production: dg.EnvVar("MDAME_TELEGRAM_BOT_TOKEN"); empty: read it
    api_url: str = ""  # empty: MDAME_TELEGRAM_API_URL, else https://api.telegram.org
    chat_id: str = ""  # the global chat; empty: MDAME_TELEGRAM_CHAT_ID
    dimensions_dir: str = ""  # where <slug>.yaml names a dimension's chat; empty: the setting
    timeout_s: float = 20.0
    max_wait_s: float = 60.0  # the most a call waits for 429s in all before giving up
    server_retries: int = 3
    backoff_s: float = 1.0

    # -- configuration -------------------------------------------------------------------------
    def _token(self) -> str:
        token = self.bot_token or settings.raw(TOKEN_VAR)
        if not token:
            raise NotifyConfigError(f"no Telegram bot token: set {TOKEN_VAR}")
        return token

    def base_url(self) -> str:
        return (self.api_url or settings.raw(API_URL_VAR) or DEFAULT_API_URL).rstrip("/")

    def dimension_chat(self, dimension: str) -> str:
        """The chat the dimension's YAML names ('' when none, or the file is missing or
        malformed: the registry sync reports a malformed file; its alerts still go out)."""
        if not SLUG_PATTERN.match(dimension):
            return ""
        folder = Path(self.dimensions_dir) if self.dimensions_dir else dimensions_dir()
        path = folder / f"{dimension}.yaml"
        if not path.is_file():
            return ""
        try:
            return load_dimension_file(path).alerts.telegram_chat
        except DimensionConfigError:
            return ""

    def chat_for(self, dimension: str | None) -> str:
        chat = self.dimension_chat(dimension) if dimension else ""
        chat = chat or self.chat_id or settings.raw(CHAT_VAR)
        if not chat:
            where = f"alerts.telegram_chat in dimensions/{dimension}.yaml or " if dimension else ""
            raise NotifyConfigError(
                f"no Telegram chat for {dimension or 'global'}: set {where}{CHAT_VAR}"
            )
        return chat

    # -- the Bot API -----------------------------------------------------------------------
    def get_me(self) -> dict[str, Any]:
        """The bot's own user (the cheapest call that proves the token: `mdame doctor`)."""
        result = self._call("getMe")
        return result if isinstance(result, dict) else {}

    def send_message(self, dimension: str | None, text: str) -> None:
        chat = self.chat_for(dimension)
        for piece in split_message(text):
            self._call(
                "sendMessage",
                json_body={"chat_id": chat, "text": piece, "disable_web_page_preview": True},
            )

    def send_photo(self, dimension: str | None, png: bytes, caption: str) -> None:
        chat = self.chat_for(dimension)
        self._call(
            "sendPhoto",
            form={"chat_id": chat, "caption": cut_caption(caption)},
            files={"photo": ("plot.png", png, "image/png")},
        )

    # -- health ------------------------------------------------------------------------------
    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """getMe through this client, one try (a health check reports an outage, it does not
        wait one out), then a chat for every active dimension in scope and for global alerts."""
        field = self.bot_token
        token_name = field.env_var_name if isinstance(field, dg.EnvVar) else TOKEN_VAR
        notifier = resolved(self, timeout_s=timeout, server_retries=0, max_wait_s=0)
        try:
            token = notifier._token()
        except NotifyConfigError:
            return [
                Health(
                    Status.FAIL,
                    f"{token_name} is not set: alerts and reports cannot reach Telegram",
                )
            ]
        redact = Redactor([token])
        where = display_url(notifier.base_url())
        try:
            bot = notifier.get_me()
        except TelegramUnauthorized:
            return [
                Health(
                    Status.FAIL,
                    f"getMe at {where} answered HTTP 401 Unauthorized (the bot token was refused)",
                )
            ]
        except TelegramError as exc:
            what = (
                f"not reachable ({exc.description})"
                if exc.status == 0
                else f"answered HTTP {exc.status} {exc.description}"
            )
            return [Health(Status.FAIL, redact(f"getMe at {where} {what}"))]
        unrouted = []
        for slug in scope.slugs if scope else ():
            try:
                notifier.chat_for(slug)
            except NotifyConfigError:
                unrouted.append(slug)
        name = redact(f"bot @{bot.get('username')} at {where}")
        if unrouted:
            return [
                Health(
                    Status.FAIL,
                    f"{name}, but no chat for {', '.join(unrouted)}: set {CHAT_VAR} or "
                    "the dimension's alerts.telegram_chat",
                )
            ]
        try:
            notifier.chat_for(None)
        except NotifyConfigError:
            return [
                Health(
                    Status.WARN,
                    f"{name}; no global chat ({CHAT_VAR}): alerts of no dimension are "
                    "not delivered",
                )
            ]
        return [Health(Status.OK, name)]

    def _call(
        self,
        method: str,
        *,
        json_body: dict[str, Any] | None = None,
        form: dict[str, str] | None = None,
        files: dict[str, tuple[str, bytes, str]] | None = None,
    ) -> Any:
        url = f"{self.base_url()}/bot{self._token()}/{method}"
        waited = 0.0
        failures = 0
        client = http_client("telegram")  # the process's: alerts in a burst share a connection
        while True:
            status, body, unreachable = 0, None, ""
            try:
                response = client.post(
                    url, json=json_body, data=form, files=files, timeout=self.timeout_s
                )
                status = response.status_code
                body = _json_or_none(response)
            except httpx.HTTPError as exc:
                # Only the class name: str(exc) may hold the URL, so the token.
                unreachable = type(exc).__name__
            if isinstance(body, dict) and body.get("ok") is True:
                return body.get("result")
            description = (
                str(body.get("description", ""))
                if isinstance(body, dict)
                else unreachable or f"HTTP {status} without a Bot API answer"
            )
            if status == 429:
                retry_after = _retry_after(body)
                if waited + retry_after > self.max_wait_s:
                    raise TelegramError(
                        method, 429, f"{description} (rate limited past {self.max_wait_s:g}s)"
                    )
                log.warning("Telegram %s: 429, retrying after %ss", method, retry_after)
                time.sleep(retry_after)
                waited += retry_after
                continue
            if status == 0 or status >= 500:
                failures += 1
                if failures > self.server_retries:
                    raise TelegramError(method, status, description)
                log.warning("Telegram %s: %s, retry %d", method, status or description, failures)
                time.sleep(self.backoff_s * 2 ** (failures - 1))
                continue
            if status == 401:
                raise TelegramUnauthorized(
                    method, 401, f"{description}: the bot token was refused; check {TOKEN_VAR}"
                )
            raise TelegramError(method, status, description)


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _retry_after(body: Any) -> float:
    params = body.get("parameters") if isinstance(body, dict) else None
    value = params.get("retry_after") if isinstance(params, dict) else None
    return float(value) if isinstance(value, int | float) and value >= 0 else 1.0


class OutboxNotifier(NotifierResource):
    """Offline: every message is a JSON line in <outbox>/telegram/<dimension|_global>.jsonl, as
    the Bot API would get it (long texts split, captions cut); photos are PNG files beside it."""

    root: str = ""  # empty: $MDAME_HOME/outbox

    no_health_check: ClassVar[str] = "offline: it calls no service"

    @property
    def offline(self) -> bool:
        return True

    def folder(self) -> Path:
        return (Path(self.root) if self.root else mdame_home() / "outbox") / "telegram"

    def file_for(self, dimension: str | None) -> Path:
        if dimension is not None and not SLUG_PATTERN.match(dimension):
            raise NotifyError(f"not a dimension slug: {dimension!r}")
        return self.folder() / f"{dimension or GLOBAL}.jsonl"

    def _append(self, dimension: str | None, entry: dict[str, Any]) -> None:
        path = self.file_for(dimension)
        path.parent.mkdir(parents=True, exist_ok=True)
        line = json.dumps(
            {"at": datetime.now(UTC).isoformat(), "dimension": dimension, **entry},
            ensure_ascii=False,
        )
        # One write per line on an O_APPEND file: concurrent writers never interleave a line.
        with path.open("a", encoding="utf-8") as out:
            out.write(line + "\n")

    def send_message(self, dimension: str | None, text: str) -> None:
        for piece in split_message(text):
            self._append(dimension, {"method": "sendMessage", "text": piece})

    def send_photo(self, dimension: str | None, png: bytes, caption: str) -> None:
        name = f"{dimension or GLOBAL}-{hashlib.sha256(png).hexdigest()[:16]}.png"
        photo = self.file_for(dimension).parent / name
        photo.parent.mkdir(parents=True, exist_ok=True)
        if not photo.exists():
            tmp = photo.with_suffix(".png.part")
            tmp.write_bytes(png)
            tmp.replace(photo)
        self._append(
            dimension, {"method": "sendPhoto", "photo": name, "caption": cut_caption(caption)}
        )


def read_outbox(root: Path, dimension: str | None) -> list[dict[str, Any]]:
    """The lines an OutboxNotifier wrote for `dimension` (None: the global file)."""
    path = root / "telegram" / f"{dimension or GLOBAL}.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
