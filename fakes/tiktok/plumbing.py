"""The request plumbing every part of the TikTok handler shares."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar

from fakes.common import JsonHandler
from fakes.tiktok.protocol import ERROR_STATUS, envelope

if TYPE_CHECKING:
    from fakes.tiktok.server import FakeTikTok


class Plumbing(JsonHandler):
    """Reading a request and answering it in TikTok's envelope (a 5xx fault too)."""

    fake: FakeTikTok
    # (method, path) -> (the function that answers, the request's kind); set by the handler.
    routes: ClassVar[dict[tuple[str, str], tuple[Callable[[Any, dict[str, str]], None], str]]] = {}

    def _api(self, code: str, message: str = "", data: dict[str, Any] | None = None) -> None:
        """An API answer in TikTok's envelope, with the HTTP status its error code has."""
        self._send(ERROR_STATUS[code], envelope(code, message, data))

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _json(self, raw: bytes) -> dict[str, Any] | None:
        """The request's JSON object; None after a 400 invalid_params was sent."""
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            body = None
        if not isinstance(body, dict):
            self._api("invalid_params", "The request body is not a JSON object.")
            return None
        return body

    def _server_fault(self, fault: str) -> bool:
        """Answers the queued 5xx fault of this kind, if any (True when it did)."""
        found = self.fake.faults.take(fault)
        if found is None:
            return False
        status = int(found.get("status", 500))
        self._send(status, envelope("internal_error", "TikTok server error. Try again later."))
        return True
