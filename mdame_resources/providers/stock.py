"""Stock footage for a scene: search Pexels, then Pixabay, download a chosen file, crop it to
9:16 and trim it to the scene's span.

What it decides is mdame_domain/stock.py; this module sends the requests, with one httpx
client per StockClient (its timeouts from settings):
- searches go lazily, source by source (Pexels first, each of the scene's queries in turn,
  then Pixabay), so a scene whose first candidates pass costs one request; each answer is
  cached on disk for MDAME_STOCK_SEARCH_CACHE_S (24 hours: Pixabay's terms ask for it, and
  Pexels' limit is 200 requests an hour);
- rate limits are honoured from the answers' headers: a 429, or an answer whose
  X-Ratelimit-Remaining is 0, blocks the source until its reset, and nothing more is sent to
  it from this client before then. The other source is tried meanwhile; a scene that found
  nothing while a source was waiting raises NotYet with the earliest reset (it waits, it is
  not "no footage");
- 5xx, dropped connections and timeouts are tried again (MDAME_STOCK_TRANSIENT_TRIES, with
  backoff), then StockUnavailable (transient: a later run tries again);
- a refused key is StockRefused (permanent, a dg.Failure that skips the retry policy),
  naming the variable and carrying the source's own words; so is any other 4xx;
- a download goes over https only, must be an MP4 under MDAME_STOCK_MAX_BYTES and end
  within MDAME_STOCK_DOWNLOAD_S (mdame_resources/providers/stock_files.py); a file refused
  is DownloadRefused, and the next candidate is tried.
No key reaches a log line or an error text: Pixabay's travels in the query, so every URL is
written without it (display_url) and every text the sources send back is redacted.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import httpx

from mdame_core import settings
from mdame_core.settings import mdame_home
from mdame_domain.media_profile import media_profile
from mdame_domain.paid_calls import backoff_s
from mdame_domain.redaction import display_url, redact
from mdame_domain.stock import (
    PEXELS,
    PIXABAY,
    SOURCE_NAMES,
    Rejected,
    StockCandidate,
    StockNeed,
    StockVideo,
    answer_class,
    first_line,
    key_fix,
    parse_pexels,
    parse_pixabay,
    rate_reset,
    select,
    wait_until,
)
from mdame_domain.waits import NotYet
from mdame_resources.health import Health, HealthScope
from mdame_resources.providers.base import ProviderResource
from mdame_resources.providers.http_api import trusted
from mdame_resources.providers.stock_files import (
    DownloadFailed,
    DownloadRefused,
    SearchCache,
    cut_clip,
    download,
)

log = logging.getLogger(__name__)

KEY_VARS = {PEXELS: "MDAME_PEXELS_API_KEY", PIXABAY: "MDAME_PIXABAY_API_KEY"}
URL_VARS = {PEXELS: "MDAME_PEXELS_URL", PIXABAY: "MDAME_PIXABAY_URL"}
DEFAULT_URLS = {PEXELS: "https://api.pexels.com", PIXABAY: "https://pixabay.com"}
SEARCH_PATHS = {PEXELS: "/videos/search", PIXABAY: "/api/videos/"}
TIMEOUT_ENV = "MDAME_STOCK_TIMEOUT_S"
DOWNLOAD_ENV = "MDAME_STOCK_DOWNLOAD_S"
MAX_BYTES_ENV = "MDAME_STOCK_MAX_BYTES"
TRIES_ENV = "MDAME_STOCK_TRANSIENT_TRIES"
BACKOFF_ENV = "MDAME_STOCK_BACKOFF_S"
RATE_WAIT_ENV = "MDAME_STOCK_RATE_WAIT_S"
CACHE_S_ENV = "MDAME_STOCK_SEARCH_CACHE_S"
CACHE_DIR_ENV = "MDAME_STOCK_CACHE_DIR"
_BLOCK = 64 * 1024
CLIP_FPS = 24  # as the procedural clips


@dataclass(frozen=True)
class StockSettings:
    """The durations, caps and tries of the stock client (MDAME_STOCK_*); each defaults to its
    variable's declared default."""

    timeout_s: float = settings.default(TIMEOUT_ENV)  # each socket operation
    download_s: float = settings.default(DOWNLOAD_ENV)  # a whole download, on the wall clock
    max_bytes: int = settings.default(MAX_BYTES_ENV)
    transient_tries: int = settings.default(TRIES_ENV)
    backoff_s: float = settings.default(BACKOFF_ENV)
    rate_wait_s: float = settings.default(RATE_WAIT_ENV)  # a 429 that says nothing of its reset
    cache_s: float = settings.default(CACHE_S_ENV)
    cache_dir: Path | None = None  # None: no search cache


def stock_settings() -> StockSettings:
    """The settings from the environment (each with its default)."""
    cache = settings.raw(CACHE_DIR_ENV)
    return StockSettings(
        timeout_s=settings.get(TIMEOUT_ENV),
        download_s=settings.get(DOWNLOAD_ENV),
        max_bytes=settings.get(MAX_BYTES_ENV),
        transient_tries=settings.get(TRIES_ENV),
        backoff_s=settings.get(BACKOFF_ENV),
        rate_wait_s=settings.get(RATE_WAIT_ENV),
        cache_s=settings.get(CACHE_S_ENV),
        cache_dir=Path(cache) if cache else mdame_home() / "stock-cache",
    )


class StockRefused(dg.Failure):
    """A permanent refusal: a source refused the key (`variable` names it) or the request. A
    dg.Failure that bypasses the step's RetryPolicy: the same request meets it again."""

    def __init__(self, message: str, source: str, variable: str | None = None) -> None:
        dg.Failure.__init__(self, description=message, allow_retries=False)
        self.source, self.variable = source, variable

    def __str__(self) -> str:
        return self.description or ""


class StockUnavailable(RuntimeError):
    """A source failed transiently (5xx, a dropped connection, a timeout) this run's tries
    long: nothing is wrong with the request, a later run tries again."""


class NoStockFootage(Exception):
    """No candidate of any source covered the scene (or each one tried was turned down), with
    nothing waiting: the chain's next engine is tried. `tried` and `rejected` say why."""

    def __init__(
        self, queries: Sequence[str], tried: list[dict[str, Any]], rejected: list[Rejected]
    ) -> None:
        self.queries, self.tried, self.rejected = list(queries), tried, rejected
        why = "; ".join(f"{t['key']}: {t['outcome']} ({t['reason']})" for t in tried[:5])
        super().__init__(
            f"no stock footage for {', '.join(map(repr, queries)) or 'no query'}: "
            f"{len(tried)} tried, {len(rejected)} unusable" + (f"; {why}" if why else "")
        )


@dataclass(frozen=True)
class StockClip:
    """A scene's clip made from stock footage, and where it came from."""

    path: Path
    candidate: StockCandidate
    start_s: float
    duration_s: float
    downloaded_bytes: int
    sha256: str  # of the downloaded file

    def attribution(self) -> str:
        return self.candidate.attribution()

    def provenance(self) -> dict[str, Any]:
        return {
            **self.candidate.provenance(),
            "start_s": self.start_s,
            "duration_s": self.duration_s,
            "downloaded_bytes": self.downloaded_bytes,
            "sha256": self.sha256,
        }


@dataclass
class SceneFootage:
    """The accepted clip, and the candidates tried before it (downloaded and turned down, or
    refused) and those unusable (filtered out), for the scene's record."""

    clip: StockClip
    tried: list[dict[str, Any]] = field(default_factory=list)
    rejected: list[Rejected] = field(default_factory=list)


class CandidateStream:
    """The candidates for a scene, lazily: each source's searches are sent only when the
    candidates before them are used up. Sources that could not answer now are remembered
    (`waits`: until when; `failures`: why), so the caller can tell "nothing matched" from
    "ask again later" (`raise_if_waiting`)."""

    def __init__(self, client: StockClient, queries: Sequence[str], need: StockNeed) -> None:
        # A blank query would be a refused request, not "nothing found".
        self.queries = [" ".join(q.split()) for q in queries if q.strip()]
        self.client, self.need = client, need
        self.waits: dict[str, datetime] = {}
        self.failures: dict[str, str] = {}
        self.rejected: list[Rejected] = []
        self._seen: set[str] = set()

    def __iter__(self) -> Iterator[StockCandidate]:
        for source in self.client.sources:
            for query in self.queries:
                try:
                    videos = self.client.search(source, query)
                except NotYet as wait:
                    if wait.until is not None:
                        self.waits[source] = wait.until
                    break  # the source waits: its other queries would too
                except StockUnavailable as exc:
                    self.failures[source] = str(exc)
                    break
                chosen = select(videos, self.need, self._seen)
                self.rejected += chosen.rejected
                yield from chosen.candidates

    def raise_if_waiting(self) -> None:
        """StockUnavailable when a source failed transiently, else NotYet (the earliest
        reset) when one was rate-limited; nothing when every source answered."""
        if self.failures:
            raise StockUnavailable("; ".join(self.failures.values()))
        if self.waits:
            source, until = min(self.waits.items(), key=lambda item: item[1])
            raise NotYet(_waiting(source), until)


class StockClient:
    """Searches and downloads for one run (one httpx client, closed with `close`)."""

    def __init__(
        self,
        keys: Mapping[str, str],
        urls: Mapping[str, str] | None = None,
        settings: StockSettings | None = None,
        pexels_orientation: str = "portrait",
        per_page: int = 15,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings = settings or stock_settings()
        self._keys = {s: k.strip() for s, k in keys.items() if k and k.strip()}
        self.sources = [s for s in (PEXELS, PIXABAY) if s in self._keys]
        if not self.sources:
            raise StockRefused(
                f"no stock footage source is configured: set {KEY_VARS[PEXELS]} and/or "
                f"{KEY_VARS[PIXABAY]}",
                source="",
            )
        self.urls: dict[str, str] = {}
        for source in self.sources:
            root = (urls or {}).get(source) or DEFAULT_URLS[source]
            what = f"{SOURCE_NAMES[source]} API URL ({URL_VARS[source]})"
            self.urls[source] = trusted(root, what).rstrip("/")
        self.pexels_orientation, self.per_page = pexels_orientation, per_page
        self.clock = clock
        self._cache = SearchCache(self.settings.cache_dir, self.settings.cache_s)
        self._blocked: dict[str, datetime] = {}
        self._last_reset: dict[str, datetime] = {}
        self._http = httpx.Client(
            timeout=self.settings.timeout_s,
            follow_redirects=False,
            max_redirects=5,
            event_hooks={"request": [self._check_hop]},
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> StockClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self) -> datetime:
        return datetime.fromtimestamp(self.clock(), UTC)

    def _redact(self, text: str) -> str:
        return redact(text, self._keys.values())

    @staticmethod
    def _check_hop(request: httpx.Request) -> None:
        # Every request, redirect hops included, goes to https (or a dev loopback server).
        trusted(str(request.url), "stock footage URL")

    # -- search ------------------------------------------------------------------------
    def _request(self, source: str, query: str) -> tuple[str, dict[str, str], dict[str, str]]:
        url = self.urls[source] + SEARCH_PATHS[source]
        if source == PEXELS:
            params = {"query": query, "per_page": str(min(80, max(1, self.per_page)))}
            if self.pexels_orientation:
                params["orientation"] = self.pexels_orientation
            return url, params, {"Authorization": self._keys[source]}
        params = {
            "key": self._keys[source],
            "q": query[:100],
            "per_page": str(min(200, max(3, self.per_page))),
            "safesearch": "true",
        }
        return url, params, {}

    def search(self, source: str, query: str) -> list[StockVideo]:
        """One source's videos for `query` (from the cache when fresh). NotYet while the
        source's rate window is spent, StockUnavailable after transient failures, StockRefused
        for a refused key or request."""
        query = " ".join(query.split())
        # The endpoint is part of the key: another server's links are not these.
        orientation = self.pexels_orientation if source == PEXELS else ""
        key = (source, self.urls[source], query.lower(), str(self.per_page), orientation)
        cached = self._cache.get(key)
        if cached is None:
            cached = self._search(source, query)
            self._cache.put(key, cached)
        parse = parse_pexels if source == PEXELS else parse_pixabay
        return parse(cached, query)

    def _wait(self, source: str) -> NotYet:
        return NotYet(_waiting(source), self._blocked[source])

    def _search(self, source: str, query: str) -> Any:
        name = SOURCE_NAMES[source]
        url, params, headers = self._request(source, query)
        last = ""
        for attempt in range(self.settings.transient_tries):
            if attempt:
                time.sleep(backoff_s(attempt - 1, self.settings.backoff_s))
            blocked = self._blocked.get(source)
            if blocked is not None and blocked > self._now():
                raise self._wait(source)
            try:
                response = self._http.get(url, params=params, headers=headers)
            except httpx.TransportError as exc:
                last = f"{name} search: no answer ({type(exc).__name__})"
                log.warning("stock: %s (try %d)", last, attempt + 1)
                continue
            now = self._now()
            body = self._redact(response.text)
            kind = answer_class(source, response.status_code, body)
            until = wait_until(
                response.status_code,
                response.headers,
                now,
                self.settings.rate_wait_s,
                self._last_reset.get(source),
            )
            if kind == "ok":
                self._remember_reset(source, response.headers, now)
                if until is not None:
                    self._blocked[source] = until  # Remaining 0: the next request waits
                try:
                    answer = response.json()
                except ValueError:
                    last = f"{name} search: HTTP 200 with a body that is not JSON"
                    continue
                log.info(
                    "stock: %s %r answered %s",
                    display_url(url),
                    query,
                    len(answer.get("videos") or answer.get("hits") or []),
                )
                return answer
            if kind == "wait":
                assert until is not None
                self._blocked[source] = until
                log.info("stock: %s is rate-limited until %s", name, until.isoformat())
                raise self._wait(source)
            if kind == "transient":
                last = f"{name} search: HTTP {response.status_code}"
                log.warning("stock: %s (try %d)", last, attempt + 1)
                continue
            words = first_line(_error_text(body))
            if kind == "key":
                variable = KEY_VARS[source]
                raise StockRefused(
                    f"{name} refused the API key (HTTP {response.status_code}: {words}); "
                    f"{key_fix(source, variable)}",
                    source=source,
                    variable=variable,
                )
            raise StockRefused(
                f"{name} refused the search {query!r} at {display_url(url)} "
                f"(HTTP {response.status_code}: {words})",
                source=source,
            )
        raise StockUnavailable(f"{last}, {self.settings.transient_tries} tries")

    def _remember_reset(self, source: str, headers: httpx.Headers, now: datetime) -> None:
        reset = rate_reset(headers, now)
        if reset is not None:
            self._last_reset[source] = reset

    # -- candidates --------------------------------------------------------------------
    def need(
        self,
        span_s: float,
        min_width: int | None = None,
        min_height: int | None = None,
        allow_landscape: bool = True,
    ) -> StockNeed:
        """A scene's need: its span, and no smaller than the media profile's clip."""
        profile = media_profile()
        return StockNeed(
            span_s=span_s,
            min_width=min_width or profile.clip_width,
            min_height=min_height or profile.clip_height,
            allow_landscape=allow_landscape,
            max_bytes=self.settings.max_bytes,
        )

    def candidates(self, queries: Sequence[str], need: StockNeed) -> CandidateStream:
        return CandidateStream(self, queries, need)

    # -- download and clip -------------------------------------------------------------
    def fetch(
        self,
        candidate: StockCandidate,
        out: Path,
        span_s: float,
        start_s: float | None = None,
        width: int | None = None,
        height: int | None = None,
        fps: int = CLIP_FPS,
    ) -> StockClip:
        """Downloads the candidate's file (next to `out`, removed after) and writes the
        scene's clip to `out`: `span_s` from `start_s` (centred when None), cropped to 9:16
        at width x height (the media profile's clip size when None), H.264 without audio.
        DownloadRefused when the file is not one to use; StockUnavailable when it could not
        be had after the tries."""
        profile = media_profile()
        width, height = width or profile.clip_width, height or profile.clip_height
        out.parent.mkdir(parents=True, exist_ok=True)
        part = out.with_name(f".{out.name}.download")
        try:
            size, digest = self._download_with_tries(candidate, part)
            start = cut_clip(part, out, candidate.key, span_s, start_s, (width, height), fps)
        finally:
            part.unlink(missing_ok=True)
        log.info("stock: %s cut to %.2f s from %.2f s: %s", candidate.key, span_s, start, out.name)
        return StockClip(out, candidate, start, span_s, size, digest)

    def _download_with_tries(self, candidate: StockCandidate, dest: Path) -> tuple[int, str]:
        what = f"{candidate.key} file {display_url(candidate.url)}"
        last = ""
        for attempt in range(self.settings.transient_tries):
            if attempt:
                time.sleep(backoff_s(attempt - 1, self.settings.backoff_s))
            try:
                return download(
                    self._http,
                    candidate.url,
                    dest,
                    self.settings.max_bytes,
                    self.settings.download_s,
                    what,
                )
            except DownloadFailed as exc:
                last = str(exc)
                log.warning("stock: %s (try %d)", last, attempt + 1)
        raise StockUnavailable(f"{last}, {self.settings.transient_tries} tries")

    # -- a scene -----------------------------------------------------------------------
    def clip_for_scene(
        self,
        queries: Sequence[str],
        span_s: float,
        out: Path,
        accept: Callable[[StockClip], bool] | None = None,
        max_candidates: int = 3,
        need: StockNeed | None = None,
    ) -> SceneFootage:
        """The first candidate that `accept` takes (the relevance gate; None takes the
        first), at most `max_candidates` downloaded. NoStockFootage when none was taken and
        every source answered; NotYet / StockUnavailable when a source could not answer
        now (the scene waits rather than falling back); StockRefused as it comes."""
        stream = self.candidates(queries, need or self.need(span_s))
        tried: list[dict[str, Any]] = []
        fetched = 0
        for candidate in stream:
            if fetched >= max_candidates:
                break
            fetched += 1
            try:
                clip = self.fetch(candidate, out, span_s)
            except DownloadRefused as exc:
                reason = self._redact(str(exc))
                tried.append({"key": candidate.key, "outcome": "refused", "reason": reason})
                continue
            if accept is None or accept(clip):
                return SceneFootage(clip, tried, stream.rejected)
            tried.append({"key": candidate.key, "outcome": "turned down", "reason": "by accept"})
            out.unlink(missing_ok=True)
        if fetched < max_candidates:
            stream.raise_if_waiting()
        raise NoStockFootage(queries, tried, stream.rejected)


def _waiting(source: str) -> str:
    return f"stock footage search waits for the {SOURCE_NAMES[source]} rate limit"


def _error_text(body: str) -> str:
    """The source's words: Pexels' {"error": ...}, else the body (Pixabay's plain text)."""
    with contextlib.suppress(ValueError, AttributeError):
        parsed = json.loads(body)
        if isinstance(parsed, dict) and parsed.get("error"):
            return str(parsed["error"])
    return body


class StockFootage(ProviderResource):
    """The `stock` visuals engine's settings; `client()` opens a StockClient for a run."""

    # Empty: the variables (read when a client opens, so a deployment without stock needs
    # neither). A source without a key is not searched.
    pexels_api_key: str = ""
    pixabay_api_key: str = ""
    pexels_url: str = ""  # empty: MDAME_PEXELS_URL, else https://api.pexels.com
    pixabay_url: str = ""  # empty: MDAME_PIXABAY_URL, else https://pixabay.com
    pexels_orientation: str = "portrait"  # Pexels' own filter; "" sends none
    per_page: int = 15

    def cache_key(self) -> str:
        """Folded into a stock scene's scene_hash: another engine's clip is not a hit."""
        return "stock"

    def health_check(self, timeout: float, scope: HealthScope | None = None) -> list[Health]:
        """One small search per source with a key, through the engine's client; a source
        without one is not configured (visuals_health.py)."""
        from mdame_resources.providers.visuals_health import stock_health

        return stock_health(self, timeout, scope)

    def client(self, clock: Callable[[], float] = time.time) -> StockClient:
        keys = {
            PEXELS: self.pexels_api_key or settings.raw(KEY_VARS[PEXELS]),
            PIXABAY: self.pixabay_api_key or settings.raw(KEY_VARS[PIXABAY]),
        }
        urls = {
            PEXELS: self.pexels_url or settings.raw(URL_VARS[PEXELS]),
            PIXABAY: self.pixabay_url or settings.raw(URL_VARS[PIXABAY]),
        }
        return StockClient(
            keys,
            urls,
            stock_settings(),
            pexels_orientation=self.pexels_orientation,
            per_page=self.per_page,
            clock=clock,
        )
