"""The stock servers' request handler: the source's search (each subclass answers it in its
own shape), the files and pictures with their faults, and the /_fake/ controls."""

from __future__ import annotations

import json
import re
import time
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from fakes import imagery
from fakes.common import Drop, JsonHandler
from fakes.stock_common.files import footage_file
from fakes.stock_common.footage import Footage

if TYPE_CHECKING:
    from fakes.stock_common.server import StockServer

MiB = 1024 * 1024
_FILE_PATH = re.compile(
    r"^/video-files/(?P<id>\d+)/(?P<word>[a-z]+)-(?P<w>\d+)x(?P<h>\d+)-(?P<fps>\d+)fps-"
    r"(?P<seconds>\d+)s\.mp4$"
)
_PICTURE_PATH = re.compile(r"^/video-pictures/(?P<id>\d+)-(?P<word>[a-z]+)\.png$")


class StockHandler(JsonHandler):
    """Routes: the source's search (subclass), the files and pictures, and /_fake/ controls."""

    fake: StockServer
    SEARCH_PATHS: tuple[str, ...] = ()

    # -- per source --------------------------------------------------------------------
    def key_of(self, query: dict[str, str]) -> str:
        raise NotImplementedError

    def refuse_key(self) -> None:
        """The source's answer to a missing or refused key."""
        raise NotImplementedError

    def search_answer(self, query: dict[str, str], found: list[Footage]) -> dict[str, Any] | None:
        """The source's JSON answer, or None after it answered an invalid request itself."""
        raise NotImplementedError

    def rate_limited(self, headers: dict[str, str]) -> None:
        raise NotImplementedError

    def send_text(self, status: int, text: str, headers: dict[str, str] | None = None) -> None:
        raw = text.encode()
        self.send_response(status)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.send_header("Content-Type", "text/plain; charset=utf-8")
        self.send_header("Content-Length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    # -- plumbing ----------------------------------------------------------------------
    def _dispatch(self, method: str) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        path = url.path
        kind = "search" if path.rstrip("/") in self.SEARCH_PATHS else "file"
        if path.startswith("/_fake/"):
            self._control(method, path)
            return
        status = 0
        # Counted first: a slow request is in flight, seen (status 0) while it waits.
        entry = self.fake.record(kind, path, query.get("query") or query.get("q") or "")
        slow = self.fake.faults.pop_first(
            lambda f: f["fault"] == "slow" and f.get("on") in (None, kind)
        )
        if slow is not None:
            time.sleep(float(slow.get("seconds", 1.0)))
        try:
            if method != "GET":
                status = 405
                self._send(405, {"error": f"{method} not allowed"})
            elif kind == "search":
                status = self._search(query)
            else:
                status = self._file(path)
        except Drop as drop:
            self._drop(drop.reset)
        finally:
            self.fake.answered(entry, status)

    def _common(self, fault: dict[str, Any] | None) -> int | None:
        """server_error (the status answered) and drop (raises Drop); None for other faults."""
        name = fault["fault"] if fault else None
        if fault is not None and name == "server_error":
            status = int(fault.get("status", 500))
            self._send(status, {"error": "Internal Server Error"})
            return status
        if fault is not None and name == "drop":
            raise Drop(bool(fault.get("reset", False)))
        return None

    def _search(self, query: dict[str, str]) -> int:
        fake = self.fake
        fault = fake.faults.take("rate_limited", "bad_key", request="search")
        if (status := self._common(fault)) is not None:
            return status
        name = fault["fault"] if fault else None
        key = self.key_of(query)
        if not key or (fake.keys is not None and key not in fake.keys) or name == "bad_key":
            self.refuse_key()
            return self._status
        if fault is not None and name == "rate_limited":
            end = fake.clock() + float(fault.get("reset", 60))
            self.rate_limited(fake.rate_headers(0, end) if fault.get("headers", True) else {})
            return 429
        allowed, remaining, end = fake.take_request()
        if not allowed:
            self.rate_limited(fake.rate_headers(0, end))
            return 429
        words = query.get("query") or query.get("q") or ""
        answer = self.search_answer(query, fake.catalogue(words))
        if answer is None:
            return self._status
        self._send(200, answer, fake.rate_headers(remaining, end))
        return 200

    _status = 0

    def send_response(self, code: int, message: str | None = None) -> None:
        self._status = code
        super().send_response(code, message)

    def _file(self, path: str) -> int:
        if (picture := _PICTURE_PATH.match(path)) is not None:
            data = imagery.picture_png(picture["word"], 144, 256)
            return self._bytes(200, data, "image/png")
        found = _FILE_PATH.match(path)
        if found is None:
            self._send(404, {"error": "Not Found"})
            return 404
        fault = self.fake.faults.take("wrong_type", "oversize", "truncate", request="file")
        if (status := self._common(fault)) is not None:
            return status
        name = fault["fault"] if fault else None
        if name == "wrong_type":
            page = b"<html><body>Access denied</body></html>"
            return self._bytes(200, page, "text/html; charset=utf-8")
        if name == "oversize":
            size = int(fault.get("bytes", 8 * MiB)) if fault else 8 * MiB
            return self._bytes(
                200, b"\0" * size, "video/mp4", chunked=bool(fault and fault.get("chunked"))
            )
        data = footage_file(
            found["word"],
            int(found["w"]),
            int(found["h"]),
            int(found["seconds"]),
            int(found["fps"]),
        )
        if name == "truncate":
            self.send_response(200)
            self.send_header("Content-Type", "video/mp4")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data[: len(data) // 2])
            self.wfile.flush()
            raise Drop()
        return self._bytes(200, data, "video/mp4")

    def _bytes(self, status: int, data: bytes, content_type: str, chunked: bool = False) -> int:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        if chunked:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            for start in range(0, len(data), 64 * 1024):
                block = data[start : start + 64 * 1024]
                self.wfile.write(f"{len(block):x}\r\n".encode() + block + b"\r\n")
            self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
        return status

    def _control(self, method: str, path: str) -> None:
        fake = self.fake
        length = int(self.headers.get("Content-Length") or 0)
        try:
            body = json.loads(self.rfile.read(length) or b"{}") if length else {}
            if method == "GET" and path == "/_fake/requests":
                self._send(200, fake.requests())
                return
            if method == "GET" and path == "/_fake/counters":
                self._send(200, fake.counters())
                return
            if path == "/_fake/faults":
                options = {k: v for k, v in body.items() if k != "fault"}
                fake.faults.push(str(body.get("fault")), **options)
            elif path == "/_fake/clear_faults":
                fake.clear_faults()
            elif path == "/_fake/config":
                if "keys" in body:
                    fake.keys = None if body["keys"] is None else set(body["keys"])
                if "empty" in body:
                    fake.empty = bool(body["empty"])
                if "off_topic_first" in body:
                    fake.off_topic_first = body["off_topic_first"]
                if "limits" in body:
                    fake.set_limits(**body["limits"])
            else:
                self._send(404, {"error": "no such control"})
                return
        except (TypeError, ValueError) as exc:
            self._send(400, {"error": str(exc)})
            return
        self._send(200, {})
