"""What the httpx publishers' API clients share (TikTok's, Instagram's): each request sent
exactly once (no client retries: the publisher decides what is sent again), bounded by a
deadline the publisher sets from its lease, its failures named as the publisher reads them,
and URLs trusted only when https, or http on a loopback address (the local protocol servers).
"""

from __future__ import annotations

import os
import time
from typing import Any
from urllib.parse import urlsplit

import httpx

from mdame_core.settings import SettingsError
from mdame_domain.channel import NotSent, TransferInterrupted
from mdame_domain.redaction import display_url


def loopback(host: str) -> bool:
    return host in ("localhost", "127.0.0.1", "::1") or host.startswith("127.")


def trusted(url: str, what: str) -> str:
    """`url` when it may carry a token: https, or http on a loopback address (the local
    protocol servers) but not with ENV=prod. The refusal names the URL without its query."""
    parts = urlsplit(url)
    host = (parts.hostname or "").lower()
    local = parts.scheme == "http" and loopback(host) and os.environ.get("ENV") != "prod"
    if not host or not (parts.scheme == "https" or local):
        raise SettingsError(
            f"the {what} {display_url(url)!r} must be an https URL "
            "(or, with ENV=dev, http on a loopback address)"
        )
    return url


class OneShotHttp:
    """Requests sent once each, ending by `deadline` (a time.time() value, or None)."""

    def __init__(self, timeout_s: float) -> None:
        self.timeout_s = timeout_s
        self.deadline: float | None = None

    def _timeout(self) -> float:
        left = self.timeout_s
        if self.deadline is not None:
            left = min(left, self.deadline - time.time())
        if left <= 0:
            raise NotSent("the request could not start before its deadline")
        return left

    def _send(self, method: str, url: str, what: str, **kwargs: Any) -> httpx.Response:
        """One request, sent once. A connection never made is NotSent; a request cut short,
        or one whose answer was lost, is TransferInterrupted."""
        try:
            with httpx.Client(timeout=self._timeout()) as client:
                return client.request(method, url, **kwargs)
        except httpx.ConnectError as exc:
            raise NotSent(f"{what}: no connection ({type(exc).__name__})") from None
        except (httpx.TransportError, httpx.StreamError) as exc:
            raise TransferInterrupted(f"{what}: no answer ({type(exc).__name__})") from None
