"""What the local stock footage servers (fakes/pexels.py, fakes/pixabay.py) share: the footage
they offer for a query, the MP4 files they serve, their rate window, keys and faults.

The footage. A query's subject is `imagery.depicted_word(query)`; a query with none finds
nothing. Every answer offers a fixed mix of videos (each module's TEMPLATE, in the API's
order), on purpose not all usable, so that a client's filters and relevance gate are exercised:
  on_topic         the subject, portrait, long enough, in sizes from 360x640 up;
  landscape        the subject, 16:9 (a 9:16 centre crop still covers 360x640 from 1280x720);
  off_topic        ANOTHER word (OFF_TOPIC_WORDS), as good as on_topic otherwise; it comes
                   first for about half the queries (by the query's hash; `off_topic_first`
                   forces it), so a client that trusts the first result shows the wrong thing;
  too_short        the subject, 1 second long;
  low_res          the subject, portrait, 90x160 at most;
  small_landscape  the subject, 256x144 at most.
A video's id, author and words depend on the source, its role and its word only, so the same
footage comes back for another query with the same subject (clients see duplicates).

The files. Each rendition's link points back at the server (/video-files/...), and is a real
H.264 MP4 of its size, frame rate and length, showing its word as fakes/imagery draws it: a
tiny clip of the word is made once per word (imagery.footage_mp4) and scaled to each size
asked, each result cached in the process, so a test pays for a word once.

Rate window: `rate_limit` API requests per `rate_window` seconds (the file downloads are not
counted, as on the real CDNs); past it, 429. Every API answer carries X-Ratelimit-Limit,
-Remaining and -Reset (the reset's form is the source's: see each module). `clock` (time.time
by default) can be replaced to move time on without sleeping.

Faults, queued (`server.faults.push(name, **options)`, or POST /_fake/faults {"fault": name,
...}), each used once, on the kind of request it names:
  rate_limited  (search) 429 with Remaining 0 and a reset `reset` seconds away (default 60);
                `headers=False` sends the 429 bare (as Pexels' docs say it may);
  server_error  (any; option `on`: search or file) answers `status` (default 500);
  drop          (any; `on`) closes the connection without an answer (`reset=True`: an RST);
  bad_key       (search) refuses the key as the source does, this once;
  wrong_type    (file) answers 200 with an HTML page instead of the video;
  oversize      (file) answers `bytes` bytes (default 8 MiB) as video/mp4; `chunked=True`
                sends them without a Content-Length;
  truncate      (file) announces the whole file and closes after half of it;
  slow          (any; `on`) waits `seconds` before answering (counted, status 0, meanwhile).
Keys: `server.keys` None accepts any non-empty key; a set accepts only those. The key is
never stored: the requests seen (`server.requests()`, GET /_fake/requests) keep the path
without the query, the search terms and the status answered; `server.counters()` (GET
/_fake/counters) sums them.
"""

from __future__ import annotations

import atexit
import hashlib
import json
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from fakes import imagery
from fakes.common import Drop, JsonHandler, JsonState, LocalServer, NamedFaults

MiB = 1024 * 1024
FAULTS: dict[str, str] = {
    "rate_limited": "search",
    "server_error": "any",
    "drop": "any",
    "bad_key": "search",
    "wrong_type": "file",
    "oversize": "file",
    "truncate": "file",
    "slow": "any",
}
ROLES = ("on_topic", "landscape", "off_topic", "too_short", "low_res", "small_landscape")
# Subjects no narration of the tests or the demo says, each far from the others in colour.
OFF_TOPIC_WORDS = (
    "umbrella", "pineapple", "lighthouse", "saxophone", "cactus", "penguin", "bicycle",
    "volcano", "accordion", "flamingo",
)  # fmt: skip
AUTHORS = (
    "Mika Sato", "Ana Lima", "Jonas Berg", "Priya Nair", "Tom Okafor", "Lea Novak",
    "Ravi Menon", "Sofia Costa",
)  # fmt: skip
PORTRAIT_LADDER = ((1080, 1920), (720, 1280), (540, 960), (360, 640))
LANDSCAPE_LADDER = ((1920, 1080), (1280, 720), (960, 540), (640, 360))
LADDERS: dict[str, tuple[tuple[int, int], ...]] = {
    "portrait": PORTRAIT_LADDER,
    "landscape": LANDSCAPE_LADDER,
    "low_res": ((90, 160),),
    "small_landscape": ((256, 144),),
}
_FILE_PATH = re.compile(
    r"^/video-files/(?P<id>\d+)/(?P<word>[a-z]+)-(?P<w>\d+)x(?P<h>\d+)-(?P<fps>\d+)fps-"
    r"(?P<seconds>\d+)s\.mp4$"
)
_PICTURE_PATH = re.compile(r"^/video-pictures/(?P<id>\d+)-(?P<word>[a-z]+)\.png$")
# The tiny clip every rendition of a word is scaled from, and its length (the longest footage).
_BASE_SIZE, _BASE_SECONDS = 48, 12


def _digest(*parts: str) -> int:
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


# --- the footage -------------------------------------------------------------------------


@dataclass(frozen=True)
class Footage:
    """One video a server offers: what it shows, its renditions (largest first)."""

    source: str
    role: str
    word: str
    id: int
    seconds: int
    fps: int
    renditions: tuple[tuple[int, int], ...]
    author: str
    author_id: int

    @property
    def width(self) -> int:
        return self.renditions[0][0]

    @property
    def height(self) -> int:
        return self.renditions[0][1]

    @property
    def portrait(self) -> bool:
        return self.height > self.width

    def file_path(self, width: int, height: int) -> str:
        return (
            f"video-files/{self.id}/{self.word}-{width}x{height}-{self.fps}fps-{self.seconds}s.mp4"
        )

    def picture_path(self) -> str:
        return f"video-pictures/{self.id}-{self.word}.png"


@dataclass(frozen=True)
class Slot:
    """A place in a source's answer: the role, its shape, its length and frame rate."""

    role: str
    shape: str  # a LADDERS key
    seconds: int
    fps: int


def off_topic_word(query: str) -> str:
    """The other subject a query's off-topic footage shows: never a word of the query, and
    far in colour from its subject (so the image judge tells them apart)."""
    subject = imagery.depicted_word(query)
    said = set(imagery.subject_words(query))
    start = _digest("off", subject) % len(OFF_TOPIC_WORDS)
    mine = imagery.colours_of(subject)
    for i in range(len(OFF_TOPIC_WORDS)):
        word = OFF_TOPIC_WORDS[(start + i) % len(OFF_TOPIC_WORDS)]
        far = imagery._distance(imagery.colours_of(word), mine) > 2 * imagery.MATCH_DISTANCE
        if word not in said and far:
            return word
    raise AssertionError(f"no off-topic word far from {subject!r}")  # ten words: never


def leads_off_topic(query: str) -> bool:
    """Whether the off-topic footage comes first for this query (about half of them)."""
    return _digest("lead", imagery.depicted_word(query)) % 2 == 0


def catalogue(
    source: str, query: str, template: tuple[Slot, ...], off_topic_first: bool | None = None
) -> list[Footage]:
    """The footage a search for `query` finds, in the API's order (see the module docstring);
    [] for a query with no subject."""
    subject = imagery.depicted_word(query)
    if subject == "nothing":
        return []
    first = leads_off_topic(query) if off_topic_first is None else off_topic_first
    slots = [s for s in template if s.role != "off_topic"]
    off = [s for s in template if s.role == "off_topic"]
    ordered = off + slots if first else slots + off
    found = []
    for slot in ordered:
        word = off_topic_word(query) if slot.role == "off_topic" else subject
        seed = _digest(source, slot.role, word)
        found.append(
            Footage(
                source=source,
                role=slot.role,
                word=word,
                id=1_000_000 + seed % 9_000_000,
                seconds=slot.seconds,
                fps=slot.fps,
                renditions=LADDERS[slot.shape],
                author=AUTHORS[seed % len(AUTHORS)],
                author_id=10_000 + seed % 90_000,
            )
        )
    return found


# --- the files ---------------------------------------------------------------------------

_render_lock = threading.Lock()
_files: dict[tuple[str, int, int, int, int], bytes] = {}
_bases: dict[str, Path] = {}
_folder: list[Path] = []


def _temporary(prefix: str) -> Path:
    """A temporary folder removed when the process exits."""
    folder = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    return folder


def _scratch() -> Path:
    if not _folder:
        _folder.append(_temporary("mdame-fake-stock-"))
    return _folder[0]


def _base(word: str) -> Path:
    if word not in _bases:
        path = _scratch() / f"{word}.mp4"
        path.write_bytes(imagery.footage_mp4(word, _BASE_SIZE, _BASE_SIZE, _BASE_SECONDS))
        _bases[word] = path
    return _bases[word]


def footage_file(word: str, width: int, height: int, seconds: int, fps: int) -> bytes:
    """A real MP4 (H.264, yuv420p, faststart, no audio) of `word` at width x height, `fps`,
    `seconds` long: the word's tiny clip scaled (cached per process)."""
    key = (word, width, height, seconds, fps)
    with _render_lock:
        if key in _files:
            return _files[key]
        out = _scratch() / f"{word}-{width}x{height}-{fps}-{seconds}.mp4"
        done = subprocess.run(
            ["ffmpeg", "-hide_banner", "-loglevel", "error", "-nostdin", "-y",
             "-i", str(_base(word)), "-t", str(seconds),
             "-vf", f"scale={width}:{height}:flags=bicubic,setsar=1", "-r", str(fps),
             "-c:v", "libx264", "-preset", "ultrafast", "-pix_fmt", "yuv420p",
             "-movflags", "+faststart", "-an", str(out)],
            capture_output=True,
            timeout=120,
            check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise RuntimeError(f"ffmpeg failed: {done.stderr.decode(errors='replace')[-500:]}")
        data = out.read_bytes()
        out.unlink()
        _files[key] = data
        return data


def file_size_estimate(width: int, height: int, seconds: int) -> int:
    """What an answer says a rendition weighs (Pixabay's `size`), before it is ever made."""
    return max(4096, width * height * seconds // 10)


# --- the server --------------------------------------------------------------------------


class StockState(JsonState):
    """The rate window, the limits and the requests seen (never a key)."""

    def defaults(self) -> None:
        self.data.setdefault("limits", {})  # those set; the server's LIMITS for the rest
        self.data.setdefault("rate", {"start": 0.0, "used": 0})
        self.data.setdefault("requests", [])


class StockServer(LocalServer):
    """A stock API's server. Subclasses name the source, its search path and answer shapes."""

    state: StockState
    source = ""
    TEMPLATE: tuple[Slot, ...] = ()
    # API requests a window, and the window in seconds.
    LIMITS: dict[str, float] = {"rate_limit": 200, "rate_window": 3600.0}

    def __init__(self, state_dir: str | Path | None = None, port: int = 0, host: str = "127.0.0.1"):
        folder = Path(state_dir) if state_dir else _temporary(f"mdame-fake-{self.source}-")
        self.state = StockState(folder)
        self.state.load()
        self.faults = NamedFaults(FAULTS)
        self.clock: Callable[[], float] = time.time
        self.keys: set[str] | None = None  # None: any non-empty key
        self.empty = False  # every search finds nothing
        self.off_topic_first: bool | None = None  # None: by the query's hash
        super().__init__(host, port)

    # -- set-up ------------------------------------------------------------------------
    def set_limits(self, **limits: Any) -> None:
        unknown = set(limits) - set(self.LIMITS)
        if unknown:
            raise ValueError(f"unknown limits {sorted(unknown)}; known: {sorted(self.LIMITS)}")
        with self.state.lock:
            self.state.data["limits"].update(limits)
            self.state.save()

    def _limit(self, name: str) -> float:
        with self.state.lock:
            return float(self.state.data["limits"].get(name, self.LIMITS[name]))

    @property
    def rate_limit(self) -> int:
        return int(self._limit("rate_limit"))

    @property
    def rate_window(self) -> float:
        return self._limit("rate_window")

    def clear_faults(self) -> None:
        self.faults.clear()

    def catalogue(self, query: str) -> list[Footage]:
        return (
            [] if self.empty else catalogue(self.source, query, self.TEMPLATE, self.off_topic_first)
        )

    def link(self, path: str) -> str:
        return self.base_url + path

    # -- what it saw -------------------------------------------------------------------
    def requests(self) -> list[dict[str, Any]]:
        with self.state.lock:
            return [dict(r) for r in self.state.data["requests"]]

    def counters(self) -> dict[str, Any]:
        """API searches and file downloads seen, and the statuses answered ("0": none)."""
        seen = self.requests()
        by_status: dict[str, int] = {}
        for r in seen:
            by_status[str(r["status"])] = by_status.get(str(r["status"]), 0) + 1
        return {
            "search": sum(1 for r in seen if r["kind"] == "search"),
            "file": sum(1 for r in seen if r["kind"] == "file"),
            "by_status": by_status,
        }

    def record(self, kind: str, path: str, query: str) -> dict[str, Any]:
        """Counts a request as it arrives, before any answer: a client that has its answer
        finds it counted. Its status ("0" until answered) is set by `answered`."""
        entry: dict[str, Any] = {"kind": kind, "path": path, "query": query, "status": 0}
        with self.state.lock:
            self.state.data["requests"].append(entry)
            self.state.save()
        return entry

    def answered(self, entry: dict[str, Any], status: int) -> None:
        with self.state.lock:
            entry["status"] = status
            self.state.save()

    # -- the rate window ---------------------------------------------------------------
    def take_request(self) -> tuple[bool, int, float]:
        """Counts an API request in the window: (allowed, remaining, the window's end)."""
        now = self.clock()
        with self.state.lock:
            rate = self.state.data["rate"]
            if now >= rate["start"] + self.rate_window:
                rate["start"], rate["used"] = now, 0
            end = rate["start"] + self.rate_window
            if rate["used"] >= self.rate_limit:
                self.state.save()
                return False, 0, end
            rate["used"] += 1
            self.state.save()
            return True, self.rate_limit - rate["used"], end

    def reset_header(self, window_end: float) -> str:
        """X-Ratelimit-Reset as the source writes it (a Unix time, or seconds left)."""
        raise NotImplementedError

    def rate_headers(self, remaining: int, window_end: float) -> dict[str, str]:
        return {
            "X-Ratelimit-Limit": str(self.rate_limit),
            "X-Ratelimit-Remaining": str(max(0, remaining)),
            "X-Ratelimit-Reset": self.reset_header(window_end),
        }

    def handler(self) -> type[BaseHTTPRequestHandler]:
        return StockHandler


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


def environ_for(*servers: StockServer) -> dict[str, str]:
    """The endpoint variables (MDAME_PEXELS_URL, MDAME_PIXABAY_URL) that point the stock
    provider at these servers."""
    return {f"MDAME_{s.source.upper()}_URL": s.base_url.rstrip("/") for s in servers}


def stock_main(
    server: Callable[[str | None, int, str], StockServer],
    name: str,
    limit: int,
    window_s: float,
    description: str,
    argv: list[str] | None = None,
) -> None:
    """`python -m fakes.pexels|pixabay`: one stock server until Ctrl-C, with its key and
    rate-limit window on the command line."""
    import argparse

    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state-dir", default=None, help="its counters (default: a temp folder)")
    parser.add_argument("--key", action="append", help="accept only this key (repeatable)")
    parser.add_argument("--rate-limit", type=int, help=f"API requests a window (default {limit})")
    parser.add_argument("--rate-window", type=float, help=f"the window, seconds ({window_s:g})")
    args = parser.parse_args(argv)
    fake = server(args.state_dir, args.port, args.host)
    if args.key:
        fake.keys = set(args.key)
    if args.rate_limit is not None:
        fake.set_limits(rate_limit=args.rate_limit)
    if args.rate_window is not None:
        fake.set_limits(rate_window=args.rate_window)
    fake.serve_until_interrupted(f"fake {name} on {{base_url}}")
