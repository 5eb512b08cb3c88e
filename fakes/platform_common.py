"""What the publishing platforms' fakes (fakes.youtube, fakes.tiktok, fakes.instagram) share
beyond fakes.common: the request log and state a test reads back, the fault control route, an
answer trickled out a line at a time, and the standalone entry's options."""

from __future__ import annotations

import argparse
import json
import time
from http.server import BaseHTTPRequestHandler
from typing import Any

from fakes.common import FaultQueue, LocalServer


class PlatformServer(LocalServer):
    """A platform fake whose state logs every request line ("requests") and the kinds of the
    requests refused for their token ("unauthorized")."""

    def requests(self) -> list[str]:
        """Every request line seen (method, path and query), oldest first."""
        with self.state.lock:
            return list(self.state.data["requests"])

    def unauthorized(self) -> list[str]:
        """The kinds of the requests refused for their token, oldest first (the fake's
        docstring names its kinds)."""
        with self.state.lock:
            return list(self.state.data["unauthorized"])

    def snapshot(self) -> dict[str, Any]:
        """A deep copy of the whole state, as GET /_fake/state answers it."""
        with self.state.lock:
            return json.loads(json.dumps(self.state.data))


def push_fault(faults: FaultQueue, raw: bytes) -> tuple[int, dict[str, Any]]:
    """POST /_fake/faults: queues the fault the JSON body names ({"fault": name, **options});
    the answer's status and body (the faults pending, or why it was refused)."""
    spec = json.loads(raw or b"{}")
    try:
        faults.push(spec.pop("fault"), **spec)
    except (KeyError, ValueError) as exc:
        return 400, {"error": str(exc)}
    return 200, {"pending": faults.pending()}


def trickle(
    handler: BaseHTTPRequestHandler,
    status: int,
    headers: list[str],
    body: bytes,
    fault: dict[str, Any],
) -> None:
    """The answer for a slow_answer `fault`: its head a line every `seconds` (default 1),
    padded to `lines` lines (default 6), then its body. No read waits long, the whole answer
    does; the client may go away meanwhile (what the request carried is kept all the same), so
    the connection is not reused."""
    pause, lines = float(fault.get("seconds", 1.0)), int(fault.get("lines", 6))
    head = [f"HTTP/1.1 {status} {handler.responses[status][0]}", *headers]
    head += [f"X-Slow-{n}: {n}" for n in range(max(0, lines - len(head) - 1))]
    head += [f"Content-Length: {len(body)}"]
    handler.close_connection = True
    try:
        for line in head:
            handler.wfile.write(f"{line}\r\n".encode())
            handler.wfile.flush()
            time.sleep(pause)
        handler.wfile.write(b"\r\n" + body)
    except OSError:
        pass


def standalone_parser(
    name: str, doc: str | None, accounts: str, metavar: str, what: str
) -> argparse.ArgumentParser:
    """`python -m fakes.<name>`'s options: --port, --state-dir (.mdame/fake-<name>), and the
    repeatable `accounts` option (`--channel`, ...) that makes one account at start from each
    METAVAR pair, parsed into `args.accounts` as (name, token) pairs."""
    parser = argparse.ArgumentParser(
        prog=f"python -m fakes.{name}", description=(doc or "").split("\n")[0]
    )
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default=f".mdame/fake-{name}")
    parser.add_argument(
        accounts,
        dest="accounts",
        action="append",
        default=[],
        type=_pair,
        metavar=metavar,
        help=f"{what} (repeatable)",
    )
    return parser


def _pair(spec: str) -> tuple[str, str]:
    name, _, token = spec.partition("=")
    return name, token
