"""The request plumbing every part of the Instagram handler shares."""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import parse_qs

from fakes.common import JsonHandler
from fakes.instagram.protocol import graph_error, no_object

if TYPE_CHECKING:
    from fakes.instagram.server import FakeInstagram


class Answered(Exception):
    """An error answer was sent; stop handling the request."""


class Plumbing(JsonHandler):
    """Reading a request (sized or chunked bodies, Meta's parameters wherever they are sent)
    and answering an error that ends its handling."""

    fake: FakeInstagram
    _kind = "refresh"  # the graph request's kind, once routed (the login paths': refresh)

    # -- plumbing ------------------------------------------------------------------------
    def _fail(self, status: int, body: Any, headers: dict[str, str] | None = None) -> NoReturn:
        self._send(status, body, headers)
        raise Answered

    def _body(self, limit: int | None = None) -> bytes:
        """The request body (chunked or sized); what arrived when the client went away."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            return self._chunked(limit)
        length = int(self.headers.get("Content-Length") or 0)
        if limit is not None:
            length = min(length, limit)
        parts: list[bytes] = []
        left = length
        while left > 0:
            try:
                piece = self.rfile.read(min(left, 1 << 16))
            except OSError:
                break
            if not piece:
                break
            parts.append(piece)
            left -= len(piece)
        return b"".join(parts)

    def _chunked(self, limit: int | None) -> bytes:
        data = bytearray()
        try:
            while limit is None or len(data) < limit:
                size_line = self.rfile.readline()
                if not size_line:
                    break
                size = int(size_line.split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                piece = self.rfile.read(size)
                data += piece
                if len(piece) < size:
                    break
                self.rfile.readline()
        except (OSError, ValueError):
            pass
        return bytes(data if limit is None else data[:limit])

    def _slow(self, kind: str) -> None:
        fault = self.fake.faults.take(kind, "slow")
        if fault is not None:
            time.sleep(float(fault.get("seconds", 1.0)))

    # -- graph ---------------------------------------------------------------------------
    def _params(self, query: str) -> dict[str, str]:
        """Query, form and JSON body parameters together (Meta takes any of them)."""
        params = {k: v[-1] for k, v in parse_qs(query, keep_blank_values=True).items()}
        body = self._body()
        ctype = self.headers.get("Content-Type", "")
        if body and "json" in ctype:
            try:
                decoded = json.loads(body)
            except ValueError:
                decoded = None
            if isinstance(decoded, dict):
                for k, v in decoded.items():
                    params[k] = v if isinstance(v, str) else json.dumps(v)
        elif body:
            text = body.decode("utf-8", "replace")
            params.update({k: v[-1] for k, v in parse_qs(text, keep_blank_values=True).items()})
        return params

    def _owned_account(self, account: str, node: str) -> None:
        if node not in (account, "me"):
            self._fail(400, no_object(self.command, node))

    def _fields(self, params: dict[str, str], allowed: tuple[str, ...], node_type: str) -> list:
        wanted = [f.strip() for f in params.get("fields", "").split(",") if f.strip()]
        for name in wanted:
            if name not in allowed:
                self._fail(
                    400,
                    graph_error(
                        f"(#100) Tried accessing nonexisting field ({name}) on node type "
                        f"({node_type})",
                        100,
                    ),
                )
        return wanted
