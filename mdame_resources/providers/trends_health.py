"""The trend sources' health check (what `mdame doctor` prints for HttpFeedTrendSource): one
fetch of each source the active dimensions read (their `feeds:` and `sources:`, each source
once however many dimensions list it), through the provider's own client (its request, size
cap, redirect rule and key handling) with the check's timeout for each of its bounds, and no
feed cache: a full answer, parsed as the trends stage parses it, nothing written.

A source that does not answer in time, is not listening, or answers 429 or a 5xx WARNs
(transient: the trends stage skips a failing source, and fails only when all of them fail); a
YouTube source whose key is missing or refused FAILs naming the key's variable; any other
answer a run could not use FAILs naming the dimensions that list the source.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from mdame_domain.doctor import Redactor, Status
from mdame_domain.feed_sources import FeedSource
from mdame_domain.trends import FeedError
from mdame_resources.health import Health, HealthScope, resolved, setting

if TYPE_CHECKING:
    from mdame_domain.dimensions import DimensionConfig
    from mdame_resources.providers.trends import FetchFailed, HttpFeedTrendSource

Listed = dict[str, tuple[FeedSource, list[str]]]


def listed_sources(resource: HttpFeedTrendSource, scope: HealthScope | None) -> Listed:
    """Each source's key (its URL without a secret, or its file path) -> (the source, the
    active dimensions that list it), in the dimensions' order."""
    listed: Listed = {}
    for dim in scope.dimensions if scope else ():
        for source in dim.trend_sources():
            slugs = listed.setdefault(resource.source_key(source), (source, []))[1]
            if dim.slug not in slugs:
                slugs.append(dim.slug)
    return listed


def trend_sources_health(
    resource: HttpFeedTrendSource, timeout: float, scope: HealthScope | None
) -> list[Health]:
    """One finding per source (its subject the source's key)."""
    from mdame_resources.providers.trends import FetchFailed

    listed = listed_sources(resource, scope)
    if not listed:
        return [Health(Status.SKIP, "no active dimension: no trend source to check")]
    key, key_name = setting(resource, "youtube_api_key")
    probe = resolved(
        resource, connect_timeout_s=timeout, read_timeout_s=timeout, total_timeout_s=timeout
    )
    only_files = _only_files(scope.dimensions if scope else ())
    redact = Redactor([key] if key else [])
    found: list[Health] = []
    for where, (source, slugs) in listed.items():
        listed_by = f"listed by {', '.join(slugs)}"
        if source.needs_api_key and not key:
            status, message = Status.FAIL, f"{key_name} is not set ({listed_by}): {_KEY_FIX}"
        else:
            try:
                result = probe.fetch(source)
            except FetchFailed as exc:
                status, message = _failed(exc, source, key_name, timeout, slugs)
            except FeedError as exc:
                status, message = _unusable(exc, source, slugs, only_files)
            else:
                items = f"{len(result.items)} items" + (
                    f" ({len(result.skipped)} unstorable)" if result.skipped else ""
                )
                verb = "read" if result.status == "file" else "answered"
                status, message = Status.OK, f"{verb} {items} ({listed_by})"
        found.append(Health(status, redact(message), where))
    return found


_KEY_FIX = "set it to a key of a project with the YouTube Data API v3 enabled"


def _yaml(slugs: Sequence[str]) -> str:
    return ", ".join(f"dimensions/{slug}.yaml" for slug in slugs)


def _failed(
    exc: FetchFailed, source: FeedSource, key_name: str, timeout: float, slugs: Sequence[str]
) -> tuple[Status, str]:
    text = exc.problem.lower()
    quota = exc.http_status == 403 and ("quota" in text or "ratelimit" in text)
    if source.needs_api_key and not quota and _key_refused(exc.http_status, text):
        return Status.FAIL, f"refused {key_name} ({exc.problem}): {_KEY_FIX}"
    if exc.transient or quota:
        return (
            Status.WARN,
            f"{exc.problem} within {timeout:g}s each (transient: the trends stage skips a "
            "source while it fails; try again)",
        )
    return Status.FAIL, f"{exc.problem}: check the source in {_yaml(slugs)}"


def _key_refused(http_status: int | None, text: str) -> bool:
    """401/403, or Google's 400 for a key it does not know ("API key not valid")."""
    return http_status in (401, 403) or (http_status == 400 and "api key" in text)


def _unusable(
    exc: FeedError, source: FeedSource, slugs: Sequence[str], only_files: set[str]
) -> tuple[Status, str]:
    """An answer (or a file) a run cannot use: a sample file the production provider never
    reads, or a body that is not the feed its kind says."""
    if not source.is_file:
        return Status.FAIL, f"{exc.problem}: check the source in {_yaml(slugs)}"
    stuck = [slug for slug in slugs if slug in only_files]
    fix = f"give it live `sources:` or http(s) `feeds:` in {_yaml(slugs)}"
    if stuck:
        return Status.FAIL, f"{exc.problem}; {', '.join(stuck)} read no other source: {fix}"
    return Status.WARN, f"{exc.problem} (every run skips it): remove it from {_yaml(slugs)}"


def _only_files(dimensions: Sequence[DimensionConfig]) -> set[str]:
    """The dimensions whose every source is a sample feed file."""
    return {dim.slug for dim in dimensions if all(s.is_file for s in dim.trend_sources())}
