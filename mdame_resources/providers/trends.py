"""Trend sources: sample feed files shipped in the repo (offline), or live sources over HTTP.

Both return a SourceResult per source; a source that cannot be read raises FeedError naming it
(the trends asset logs and skips it, and fails only when every source failed).

The live reader uses httpx directly, also for YouTube's videos.list: it is one GET of a JSON
document, and going through the same code path gives it the same timeouts, size cap, redirect
bound, conditional GET (YouTube answers If-None-Match with 304) and error redaction as every
feed. google-api-python-client would add httplib2 with its own timeout and retry behaviour,
and its HttpError quotes the request URL, key included.
"""

from __future__ import annotations

import json
import logging
import socket
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol
from urllib.parse import quote

import httpx

from mdame_core import settings
from mdame_core.settings import REPO_ROOT
from mdame_core.state import Fenced
from mdame_domain.feed_formats import cached_items, parse_source_body
from mdame_domain.feed_sources import (
    DEFAULT_GOOGLE_TRENDS_ROOT_URL,
    DEFAULT_REDDIT_ROOT_URL,
    DEFAULT_YOUTUBE_ROOT_URL,
    Endpoints,
    FeedSource,
    decode_body,
    item_to_json,
    redact,
    redirect_refusal,
    request_url,
    source_from_feed_entry,
    source_key,
)
from mdame_domain.trends import FeedError, SkippedItem, TrendItem, split_storable
from mdame_resources.providers.base import ProviderResource
from mdame_resources.providers.http_api import http_client

if TYPE_CHECKING:
    from mdame_resources.health import Health, HealthScope

# Endpoints are configuration: the real services, a gateway or local fakes.
YOUTUBE_ROOT_URL_ENV = "MDAME_YOUTUBE_ROOT_URL"
GOOGLE_TRENDS_ROOT_URL_ENV = "MDAME_GOOGLE_TRENDS_ROOT_URL"
REDDIT_ROOT_URL_ENV = "MDAME_REDDIT_ROOT_URL"


class FeedCache(Protocol):
    """Where the conditional-GET validators and last items live (StateStore implements it)."""

    def get_feed_cache(self, source_url: str) -> Any: ...

    def record_feed_fetch(
        self,
        source_url: str,
        etag: str | None,
        last_modified: str | None,
        items: Sequence[Mapping[str, Any]] | None,
    ) -> int: ...


@dataclass
class SourceResult:
    """What one source gave: storable items, items skipped (unstorable text), and how."""

    key: str  # the source's label and cache key: its URL (never a secret) or file path
    kind: str
    status: str  # 'fetched', 'not_modified' (a 304 reused the cached items) or 'file'
    items: list[TrendItem]
    skipped: list[SkippedItem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # e.g. the cache could not be written

    def summary(self) -> dict[str, Any]:
        return {
            "source": self.key,
            "kind": self.kind,
            "status": self.status,
            "items": len(self.items),
            "skipped_items": len(self.skipped),
        }


class TrendSourceResource(ProviderResource):
    def endpoints(self) -> Endpoints:
        return Endpoints()

    def source_key(self, source: FeedSource) -> str:
        return source_key(source, self.endpoints())

    def fetch(self, source: FeedSource, cache: FeedCache | None = None) -> SourceResult:
        raise NotImplementedError

    def read(self, feed: str) -> list[TrendItem]:
        """A `feeds:` entry's items (kept for callers of the file/URL list)."""
        return self.fetch(source_from_feed_entry(feed)).items


class FeedFileTrendSource(TrendSourceResource):
    """Offline: feed files relative to the repository (or absolute paths)."""

    base_dir: str = ""

    no_health_check: ClassVar[str] = "offline: it calls no service"

    @property
    def offline(self) -> bool:
        return True

    def fetch(self, source: FeedSource, cache: FeedCache | None = None) -> SourceResult:
        key = self.source_key(source)
        if not source.is_file:
            raise FeedError(key, "the offline trend provider reads feed files only, not URLs")
        return _read_file(source, key, self.base_dir)


def _read_file(source: FeedSource, key: str, base_dir: str) -> SourceResult:
    path = Path(key) if Path(key).is_absolute() else Path(base_dir or REPO_ROOT) / key
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise FeedError(key, f"cannot read file ({exc.strerror})") from exc
    items, skipped = split_storable(parse_source_body(source.kind, text, key))
    return SourceResult(key, source.kind, "file", items, skipped)


class _RedactKeys(logging.Filter):
    """httpx logs every request's URL at INFO; the YouTube key is a query parameter."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        redacted = redact(message)
        if redacted != message:
            record.msg, record.args = redacted, ()
        return True


logging.getLogger("httpx").addFilter(_RedactKeys())


class _TooLarge(Exception):
    pass


class FetchFailed(FeedError):
    """A source's request failed: `http_status` when the server answered (None: no answer),
    `transient` when trying again later may succeed (no answer in time, nothing listening,
    a 429 or a 5xx)."""

    def __init__(self, source: str, problem: str, http_status: int | None, transient: bool):
        super().__init__(source, problem)
        self.http_status = http_status
        self.transient = transient


class _Problem(NamedTuple):
    text: str
    http_status: int | None = None
    transient: bool = False


def _resolve(host: str) -> list[str]:
    """The host's addresses, as the connection would look them up; none when it cannot."""
    try:
        infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
    except (OSError, UnicodeError):
        return []
    return [str(info[4][0]) for info in infos]


def _api_error(response: httpx.Response) -> str:
    """A Google API error's message and reason (say quotaExceeded), from a bounded read."""
    if "json" not in response.headers.get("content-type", ""):
        return ""
    body = b""
    for chunk in response.iter_bytes():
        body += chunk
        if len(body) > 16_384:
            return ""
    try:
        error = json.loads(body).get("error", {})
        reasons = ", ".join(
            str(e.get("reason")) for e in error.get("errors", []) if e.get("reason")
        )
        message = str(error.get("message", ""))[:300]
    except (ValueError, AttributeError):
        return ""
    return f": {message}" + (f" ({reasons})" if reasons else "") if message else ""


class HttpFeedTrendSource(TrendSourceResource):
    """Production: RSS/Atom/JSON feeds, Google Trends, YouTube mostPopular and Reddit over
    HTTP(S) with httpx: bounded in time, size and redirects; conditional GET through `cache`.
    A redirect leaving the configured origin is followed only over https to a public address
    (feed_sources.redirect_refusal)."""

    # dg.EnvVar("YOUTUBE_API_KEY") in selection.py; only youtube_most_popular sources need it.
    youtube_api_key: str | None = None
    # Empty: the MDAME_*_ROOT_URL environment variable, else the real service.
    youtube_root_url: str = ""
    google_trends_root_url: str = ""
    reddit_root_url: str = ""
    connect_timeout_s: float = 5.0
    read_timeout_s: float = 15.0
    total_timeout_s: float = 30.0  # a server dribbling bytes within the read timeout stops here
    max_bytes: int = 5_000_000
    max_redirects: int = 3
    # Reddit refuses generic client names; a descriptive one is its documented rule.
    user_agent: str = "mdame/0.1 (MD-AME trend reader)"
    trust_env: bool = True  # proxy variables (HTTPS_PROXY, NO_PROXY) apply as for any client
    # Production refuses the repository's sample feed files (invented stories must not reach a
    # real channel); the demo against local fakes reads them beside its live sources.
    read_files: bool = False

    def endpoints(self) -> Endpoints:
        def pick(value: str, env: str, default: str) -> str:
            return value or settings.raw(env) or default

        return Endpoints(
            youtube_root_url=pick(
                self.youtube_root_url, YOUTUBE_ROOT_URL_ENV, DEFAULT_YOUTUBE_ROOT_URL
            ),
            google_trends_root_url=pick(
                self.google_trends_root_url,
                GOOGLE_TRENDS_ROOT_URL_ENV,
                DEFAULT_GOOGLE_TRENDS_ROOT_URL,
            ),
            reddit_root_url=pick(
                self.reddit_root_url, REDDIT_ROOT_URL_ENV, DEFAULT_REDDIT_ROOT_URL
            ),
        )

    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """One fetch of each trend source the active dimensions read, through this client
        with `timeout` for each of its bounds (trends_health.py)."""
        from mdame_resources.providers.trends_health import trend_sources_health

        return trend_sources_health(self, timeout, scope)

    def _secrets(self) -> list[str]:
        return [self.youtube_api_key] if self.youtube_api_key else []

    def fetch(self, source: FeedSource, cache: FeedCache | None = None) -> SourceResult:
        key = self.source_key(source)
        if source.is_file:
            if self.read_files:
                return _read_file(source, key, "")
            raise FeedError(key, "a feed file is read by the offline provider, not fetched")
        url = request_url(source, self.endpoints())
        if source.needs_api_key:
            if not self.youtube_api_key:
                raise FeedError(key, "YOUTUBE_API_KEY is not set")
            url = f"{url}&key={quote(self.youtube_api_key, safe='')}"
        cached = cache.get_feed_cache(key) if cache is not None else None
        notes: list[str] = []
        reused: tuple[list[TrendItem], list[SkippedItem]] | None = None
        if cached is not None:
            # Checked before the conditional GET: a cache whose items are unusable is not
            # offered for a 304, so the full response replaces it instead of failing each day.
            try:
                reused = cached_items(cached.items, key)
            except FeedError as exc:
                notes.append(f"cached items not reused ({exc.problem[:300]}); fetched in full")
                cached = None
        headers = {"User-Agent": self.user_agent, "Accept-Encoding": "gzip, deflate"}
        if cached is not None and cached.etag:
            headers["If-None-Match"] = cached.etag
        if cached is not None and cached.last_modified:
            headers["If-Modified-Since"] = cached.last_modified
        status, response_headers, body = self._get(key, url, headers)
        if status == 304:
            if cached is None or reused is None or cache is None:
                raise FeedError(key, "HTTP 304 Not Modified, but nothing is cached to reuse")
            items, skipped = reused
            etag, modified = response_headers.get("etag"), response_headers.get("last-modified")
            self._write_cache(cache, key, etag, modified, None, notes)
            return SourceResult(key, source.kind, "not_modified", items, skipped, notes)
        text = decode_body(body, response_headers.get("content-type"), key)
        parsed = parse_source_body(source.kind, text, key, region=source.region)
        items, skipped = split_storable(parsed)
        if cache is not None:
            etag, modified = response_headers.get("etag"), response_headers.get("last-modified")
            self._write_cache(cache, key, etag, modified, [item_to_json(i) for i in items], notes)
        return SourceResult(key, source.kind, "fetched", items, skipped, notes)

    def _write_cache(
        self,
        cache: FeedCache,
        key: str,
        etag: str | None,
        modified: str | None,
        items: list[dict[str, Any]] | None,
        notes: list[str],
    ) -> None:
        """A cache that cannot be written costs a refetch, noted; a lost lock stops the stage."""
        try:
            cache.record_feed_fetch(key, etag, modified, items)
        except Fenced:
            raise
        except Exception as exc:  # noqa: BLE001 - a cache that cannot be written costs a refetch
            notes.append(f"feed cache not written: {redact(str(exc), self._secrets())[:300]}")

    def _get(self, key: str, url: str, headers: dict[str, str]) -> tuple[int, httpx.Headers, bytes]:
        """One bounded GET. Errors become FeedError naming the source, with the URL's secrets
        redacted, and raised outside the `except` so no httpx exception (whose text carries
        the URL) rides along as __context__ into Dagster's error records."""
        got = self._try_get(url, headers)
        if isinstance(got, _Problem):
            text = redact(got.text, self._secrets())
            raise FetchFailed(key, text, got.http_status, got.transient)
        return got

    def _try_get(
        self, url: str, headers: dict[str, str]
    ) -> tuple[int, httpx.Headers, bytes] | _Problem:
        timeout = httpx.Timeout(
            connect=self.connect_timeout_s,
            read=self.read_timeout_s,
            write=self.read_timeout_s,
            pool=self.connect_timeout_s,
        )
        deadline = time.monotonic() + self.total_timeout_s
        try:
            # The process's client, its connections kept across sources and runs (a feed host
            # read for several sources is connected to once). Redirects are followed here, not
            # by httpx, so each hop is checked before it is sent; a hop keeps the timeout.
            client = http_client("trends", trust_env=self.trust_env)
            request = client.build_request("GET", url, headers=headers, timeout=timeout)
            for _hop in range(self.max_redirects + 1):
                response = client.send(request, stream=True)
                try:
                    if response.next_request is None:
                        return self._read(response, deadline)
                    request = response.next_request
                finally:
                    response.close()  # a body left unread closes its connection, not reused
                refusal = redirect_refusal(url, str(request.url), _resolve)
                if refusal is not None:
                    return _Problem(f"redirect to {str(request.url)[:200]} refused: {refusal}")
            return _Problem(f"more than {self.max_redirects} redirects")
        except _TooLarge:
            return _Problem(
                f"response over the {self.max_bytes}-byte cap (aborted while streaming)"
            )
        except httpx.TimeoutException as exc:
            return _Problem(f"timed out ({type(exc).__name__}: {exc})", transient=True)
        except httpx.NetworkError as exc:  # nothing listening, a dropped connection
            return _Problem(f"fetch failed ({type(exc).__name__}: {exc})", transient=True)
        except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
            return _Problem(f"fetch failed ({type(exc).__name__}: {exc})")
        except Exception as exc:  # noqa: BLE001 - one source's failure must stay that source's
            return _Problem(f"fetch failed ({type(exc).__name__}: {exc})")

    def _read(
        self, response: httpx.Response, deadline: float
    ) -> tuple[int, httpx.Headers, bytes] | _Problem:
        """The final response's body, within the size cap and the total deadline."""
        if response.status_code == 304:
            return 304, response.headers, b""
        if response.status_code != 200:
            code = response.status_code
            status = f"HTTP {code} {response.reason_phrase}".strip()
            return _Problem(status + _api_error(response), code, code == 429 or code >= 500)
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            return _Problem(f"response of {declared} bytes is over the {self.max_bytes}-byte cap")
        chunks, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self.max_bytes:
                raise _TooLarge
            if time.monotonic() > deadline:
                raise httpx.ReadTimeout("total deadline passed")
            chunks.append(chunk)
        return 200, response.headers, b"".join(chunks)
