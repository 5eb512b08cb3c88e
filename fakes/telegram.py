"""A local Telegram Bot API server that a real HTTP client (httpx) talks to unchanged.

The wire protocol, as api.telegram.org speaks it: `POST /bot<token>/<method>` with the
parameters as a JSON body, a form (urlencoded) or multipart/form-data (the only way to upload a
file: `sendPhoto` with a `photo` part); method names are case-insensitive. Every answer is JSON:
`{"ok": true, "result": ...}` or `{"ok": false, "error_code": N, "description": "..."}`, and a
429 adds `"parameters": {"retry_after": seconds}`.

Implemented methods: getMe, sendMessage (text 1-4096 characters), sendPhoto (a PNG or JPEG
upload, caption up to 1024 characters). A wrong token answers 401 "Unauthorized", a text or
caption over the limit 400 like the real API, an unknown method 404 "Not Found".

Scripted faults, consumed one per request from a FIFO (`server.fail_next(2, 429,
retry_after=1)`), or sticky (`server.set_down(503)` until `set_down(None)`); also over HTTP
(`POST /_control/faults` with {"push": status, "count": n, "retry_after": s} or {"down": status
| null}). Every request is recorded (`server.requests`; the accepted ones in `server.messages`
and `server.photos`) so tests assert on what reached Telegram.

Standalone: `python -m fakes.telegram --port 8081` prints the base URL and the bot token to point
MDAME_TELEGRAM_API_URL and MDAME_TELEGRAM_BOT_TOKEN at.
"""

from __future__ import annotations

import argparse
import json
import struct
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fakes.common import TrackedHTTPServer

DEFAULT_TOKEN = "123456789:test-token-not-secret"
MAX_TEXT = 4096
MAX_CAPTION = 1024
BOT_USER = {
    "id": 123456789,
    "is_bot": True,
    "first_name": "MD-AME alerts (local)",
    "username": "mdame_local_bot",
    "can_join_groups": True,
    "can_read_all_group_messages": False,
    "supports_inline_queries": False,
}
_DESCRIPTIONS = {
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden: bot was blocked by the user",
    404: "Not Found",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
}


@dataclass(frozen=True)
class Received:
    """One request as the server saw it (tests assert on these)."""

    method: str  # as sent, e.g. "sendMessage"
    token: str  # the token in the path
    content_type: str  # "json", "form", "multipart" or "none"
    fields: dict[str, str]  # the parameters, as strings (JSON values are kept as sent)
    files: dict[str, tuple[str, bytes]]  # multipart file parts: name -> (filename, bytes)
    status: int  # the HTTP status answered
    at: float  # time.monotonic() when it arrived


@dataclass
class _Faults:
    queue: deque[tuple[int, int]] = field(default_factory=deque)  # (status, retry_after)
    down: int | None = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    def next(self) -> tuple[int, int] | None:
        with self.lock:
            if self.queue:
                return self.queue.popleft()
            return (self.down, 0) if self.down is not None else None


class TelegramServer:
    """The fake Bot API. `start()` serves on 127.0.0.1 (a free port by default)."""

    def __init__(self, token: str = DEFAULT_TOKEN) -> None:
        self.token = token
        self.base_url = ""
        self.requests: list[Received] = []
        self._faults = _Faults()
        self._lock = threading.Lock()
        self._message_id = 0
        self._httpd: TrackedHTTPServer | None = None

    # -- what tests read -----------------------------------------------------------------------
    def accepted(self, method: str) -> list[Received]:
        """The requests of `method` (case-insensitive) that were answered ok."""
        return [
            r for r in list(self.requests) if r.method.lower() == method.lower() and r.status == 200
        ]

    @property
    def messages(self) -> list[Received]:
        return self.accepted("sendMessage")

    @property
    def photos(self) -> list[Received]:
        return self.accepted("sendPhoto")

    def clear(self) -> None:
        """Forgets the recorded requests and every scripted fault."""
        with self._faults.lock:
            self._faults.queue.clear()
            self._faults.down = None
        self.requests.clear()

    def queued_faults(self) -> int:
        """Scripted one-shot faults no request has taken yet."""
        with self._faults.lock:
            return len(self._faults.queue)

    def clear_faults(self) -> None:
        """Every scripted fault ends; the recorded requests stay."""
        with self._faults.lock:
            self._faults.queue.clear()
            self._faults.down = None

    # -- scripting -----------------------------------------------------------------------------
    def fail_next(self, count: int = 1, status: int = 429, retry_after: int = 1) -> None:
        """The next `count` requests fail with `status` (a 429 carries retry_after)."""
        if status not in _DESCRIPTIONS or status < 400:
            raise ValueError(f"unsupported fault status {status}; one of {sorted(_DESCRIPTIONS)}")
        with self._faults.lock:
            self._faults.queue.extend([(status, retry_after)] * count)

    def set_down(self, status: int | None = 503) -> None:
        """Every request fails with `status` until set_down(None) (an outage)."""
        if status is not None and status not in _DESCRIPTIONS:
            raise ValueError(f"unsupported fault status {status}")
        with self._faults.lock:
            self._faults.down = status

    # -- the protocol --------------------------------------------------------------------------
    def handle(
        self, token: str, method: str, kind: str, params: dict[str, str], files: dict
    ) -> tuple[int, dict[str, Any]]:
        if token != self.token:
            return 401, _error(401, "Unauthorized")
        fault = self._faults.next()
        if fault is not None:
            status, retry_after = fault
            if status == 429:
                body = _error(429, f"Too Many Requests: retry after {retry_after}")
                body["parameters"] = {"retry_after": retry_after}
                return 429, body
            return status, _error(status, _DESCRIPTIONS[status])
        name = method.lower()
        if name == "getme":
            return 200, {"ok": True, "result": BOT_USER}
        if name == "sendmessage":
            return self._send_message(params)
        if name == "sendphoto":
            return self._send_photo(params, files)
        return 404, _error(404, "Not Found")

    def _chat(self, params: dict[str, str]) -> dict[str, Any] | tuple[int, dict[str, Any]]:
        raw = params.get("chat_id", "").strip()
        if not raw:
            return 400, _error(400, "Bad Request: chat_id is empty")
        if raw.startswith("@"):
            return {"id": -1000000000000 - len(raw), "type": "channel", "username": raw[1:]}
        try:
            chat_id = int(raw)
        except ValueError:
            return 400, _error(400, "Bad Request: chat not found")
        return {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"}

    def _message(self, chat: dict[str, Any], **content: Any) -> dict[str, Any]:
        with self._lock:
            self._message_id += 1
            message_id = self._message_id
        return {
            "ok": True,
            "result": {
                "message_id": message_id,
                "from": BOT_USER,
                "chat": chat,
                "date": int(time.time()),
                **content,
            },
        }

    def _send_message(self, params: dict[str, str]) -> tuple[int, dict[str, Any]]:
        chat = self._chat(params)
        if isinstance(chat, tuple):
            return chat
        text = params.get("text", "")
        if not text.strip():
            return 400, _error(400, "Bad Request: message text is empty")
        if _units(text) > MAX_TEXT:
            return 400, _error(400, "Bad Request: message is too long")
        return 200, self._message(chat, text=text)

    def _send_photo(self, params: dict[str, str], files: dict) -> tuple[int, dict[str, Any]]:
        chat = self._chat(params)
        if isinstance(chat, tuple):
            return chat
        caption = params.get("caption", "")
        if _units(caption) > MAX_CAPTION:
            return 400, _error(400, "Bad Request: message caption is too long")
        if "photo" not in files:
            # A file_id or URL string is what a client sends without an upload; we hold none.
            if params.get("photo"):
                return 400, _error(400, "Bad Request: wrong file identifier/HTTP URL specified")
            return 400, _error(400, "Bad Request: there is no photo in the request")
        size = _image_size(files["photo"][1])
        if size is None:
            return 400, _error(400, "Bad Request: IMAGE_PROCESS_FAILED")
        width, height = size
        photo = [
            {
                "file_id": f"local-photo-{self._message_id + 1}",
                "file_unique_id": f"u{self._message_id + 1}",
                "width": width,
                "height": height,
                "file_size": len(files["photo"][1]),
            }
        ]
        content: dict[str, Any] = {"photo": photo}
        if caption:
            content["caption"] = caption
        return 200, self._message(chat, **content)

    # -- serving -------------------------------------------------------------------------------
    def start(self, port: int = 0, host: str = "127.0.0.1") -> None:
        server = self

        class Handler(_Handler):
            fake = server

        self._httpd = TrackedHTTPServer((host, port), Handler)
        self.base_url = f"http://{host}:{self._httpd.server_address[1]}"
        threading.Thread(
            target=self._httpd.serve_forever, daemon=True, name="fake-telegram"
        ).start()

    def stop(self) -> None:
        """Stops listening and closes the connections clients keep alive."""
        if self._httpd is not None:
            self._httpd.stop()
            self._httpd = None

    def __enter__(self) -> TelegramServer:
        if self._httpd is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _units(text: str) -> int:
    """Length as the Bot API counts it: UTF-16 code units (an emoji outside the BMP is two)."""
    return len(text.encode("utf-16-le")) // 2


def _error(code: int, description: str) -> dict[str, Any]:
    return {"ok": False, "error_code": code, "description": description}


def _image_size(data: bytes) -> tuple[int, int] | None:
    """(width, height) of a PNG or baseline/progressive JPEG, None for anything else."""
    if data.startswith(b"\x89PNG\r\n\x1a\n") and data[12:16] == b"IHDR":
        width, height = struct.unpack(">II", data[16:24])
        return (width, height) if width and height else None
    if data.startswith(b"\xff\xd8"):
        i = 2
        while i + 9 < len(data):
            if data[i] != 0xFF:
                return None
            marker = data[i + 1]
            length = struct.unpack(">H", data[i + 2 : i + 4])[0]
            if marker in (0xC0, 0xC1, 0xC2):
                height, width = struct.unpack(">HH", data[i + 5 : i + 9])
                return width, height
            i += 2 + length
    return None


def _parse_body(content_type: str, body: bytes) -> tuple[str, dict[str, str], dict]:
    """(kind, fields, files) of a request body, for the three encodings Telegram accepts."""
    mime = content_type.split(";")[0].strip().lower()
    if not body:
        return "none", {}, {}
    if mime == "application/json":
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ValueError("the JSON body must be an object")
        return "json", {k: v if isinstance(v, str) else json.dumps(v) for k, v in data.items()}, {}
    if mime == "application/x-www-form-urlencoded":
        query = parse_qs(body.decode(), keep_blank_values=True)
        return "form", {k: v[-1] for k, v in query.items()}, {}
    if mime == "multipart/form-data":
        head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        message = BytesParser(policy=HTTP).parsebytes(head + body)
        parts: dict[str, str] = {}
        files: dict[str, tuple[str, bytes]] = {}
        for part in message.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str):
                continue
            payload = part.get_payload(decode=True)
            data = payload if isinstance(payload, bytes) else b""
            filename = part.get_filename()
            if filename is not None:
                files[name] = (filename, data)
            else:
                parts[name] = data.decode(part.get_content_charset() or "utf-8")
        return "multipart", parts, files
    raise ValueError(f"unsupported Content-Type {mime!r}")


class _Handler(BaseHTTPRequestHandler):
    fake: TelegramServer
    server_version = "FakeTelegram/1.0"
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass  # quiet: the path carries the bot token; tests read fake.requests instead

    def do_GET(self) -> None:  # noqa: N802 - stdlib name
        self._serve(b"")

    def do_POST(self) -> None:  # noqa: N802 - stdlib name
        length = int(self.headers.get("Content-Length") or 0)
        self._serve(self.rfile.read(length) if length else b"")

    def _serve(self, body: bytes) -> None:
        parts = urlsplit(self.path)
        if parts.path == "/_control/faults":
            self._control(body)
            return
        segments = parts.path.strip("/").split("/")
        if len(segments) != 2 or not segments[0].startswith("bot"):
            self._answer(404, _error(404, "Not Found"))
            return
        token, method = segments[0][3:], segments[1]
        try:
            kind, params, files = _parse_body(self.headers.get("Content-Type", ""), body)
        except (ValueError, UnicodeDecodeError) as exc:
            self._answer(400, _error(400, f"Bad Request: {exc}"))
            return
        for key, values in parse_qs(parts.query).items():
            params.setdefault(key, values[-1])
        status, answer = self.fake.handle(token, method, kind, params, files)
        self.fake.requests.append(
            Received(method, token, kind, params, files, status, time.monotonic())
        )
        self._answer(status, answer)

    def _control(self, body: bytes) -> None:
        try:
            order = json.loads(body or b"{}")
            if "push" in order:
                self.fake.fail_next(
                    int(order.get("count", 1)), int(order["push"]), int(order.get("retry_after", 1))
                )
            if "down" in order:
                self.fake.set_down(None if order["down"] is None else int(order["down"]))
            if order.get("clear"):
                self.fake.clear()
        except (ValueError, TypeError, KeyError) as exc:
            self._answer(400, _error(400, f"Bad Request: {exc}"))
            return
        self._answer(200, {"ok": True, "result": True})

    def _answer(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--token", default=DEFAULT_TOKEN)
    args = parser.parse_args()
    server = TelegramServer(args.token)
    server.start(args.port)
    print(f"MDAME_TELEGRAM_API_URL={server.base_url}", flush=True)
    print(f"MDAME_TELEGRAM_BOT_TOKEN={server.token}", flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
