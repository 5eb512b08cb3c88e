"""The stock provider's files: search answers kept on disk for their time to live, a footage
file downloaded under its caps, and the scene's clip cut from it (mdame_resources/providers/
stock.py uses them).

A download goes to https only (http to a loopback address outside ENV=prod: the local
servers), every redirect hop checked by the client's request hook; it must answer video/mp4,
stay under the byte cap (the Content-Length first, then every block read), end within its
deadline on the wall clock, and start like an MP4 (an `ftyp` box). A file refused so is
DownloadRefused (the next candidate is tried); an answer cut short, a 5xx or a 429 is
DownloadFailed (tried again).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx

from mdame_core.settings import SettingsError
from mdame_domain.mediatools import MediaToolError, MissingToolError, run_tool
from mdame_domain.paid_calls import parse_retry_after
from mdame_domain.probe import probe_media
from mdame_domain.stock import MP4, clip_args, trim_start
from mdame_resources.providers.http_api import trusted

BLOCK = 64 * 1024


class DownloadRefused(Exception):
    """This candidate's file is refused (its scheme, type, size or content): the next
    candidate is tried."""


class DownloadFailed(Exception):
    """The file could not be had this time (a 5xx or 429, a cut answer, too slow): tried
    again."""


class SearchCache:
    """Search answers as JSON files in `folder`, each good for `ttl_s` seconds from when it
    was written (None: nothing kept). A file that cannot be read or written is no answer."""

    def __init__(self, folder: Path | None, ttl_s: float) -> None:
        self.folder, self.ttl_s = folder, ttl_s

    def _file(self, key: Sequence[str]) -> Path | None:
        if self.folder is None:
            return None
        name = hashlib.sha256("\x1f".join(key).encode()).hexdigest()[:32]
        return self.folder / f"{key[0]}-{name}.json"

    def get(self, key: Sequence[str]) -> Any:
        path = self._file(key)
        if path is None or not path.exists():
            return None
        with contextlib.suppress(OSError, ValueError):
            if time.time() - path.stat().st_mtime < self.ttl_s:
                return json.loads(path.read_text())
        return None

    def put(self, key: Sequence[str], answer: Any) -> None:
        path = self._file(key)
        if path is None:
            return
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps(answer))
            os.replace(tmp, path)


def download(
    http: httpx.Client, url: str, dest: Path, max_bytes: int, deadline_s: float, what: str
) -> tuple[int, str]:
    """Streams `url` to `dest`: (bytes, SHA-256). DownloadRefused or DownloadFailed as the
    module docstring says; `what` names the file in them (never with its query)."""
    try:
        trusted(url, "stock footage file URL")
    except SettingsError:
        raise DownloadRefused(f"{what}: not an https URL") from None
    started = time.monotonic()
    digest, total = hashlib.sha256(), 0
    try:
        with http.stream("GET", url, follow_redirects=True) as response:
            status = response.status_code
            if status in (408, 429) or status >= 500:
                wait = parse_retry_after(response.headers.get("Retry-After"))
                after = f", retry after {wait:g} s" if wait else ""
                raise DownloadFailed(f"{what}: HTTP {status}{after}")
            if status != 200:
                raise DownloadRefused(f"{what}: HTTP {status}")
            kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
            if kind != MP4:
                raise DownloadRefused(f"{what}: {kind or 'no content type'}, not {MP4}")
            length = response.headers.get("Content-Length", "")
            if length.isdigit() and int(length) > max_bytes:
                raise DownloadRefused(f"{what}: {int(length)} bytes, over the {max_bytes}-byte cap")
            with dest.open("wb") as sink:
                for block in response.iter_bytes(BLOCK):
                    total += len(block)
                    if total > max_bytes:
                        raise DownloadRefused(f"{what}: over the {max_bytes}-byte cap")
                    if time.monotonic() - started > deadline_s:
                        raise DownloadFailed(f"{what}: not whole after {deadline_s:g} s")
                    sink.write(block)
                    digest.update(block)
    except SettingsError:  # the request hook refused a redirect hop
        raise DownloadRefused(f"{what}: redirected to a URL that is not https") from None
    except httpx.TooManyRedirects:
        raise DownloadRefused(f"{what}: too many redirects") from None
    except (httpx.TransportError, httpx.StreamError) as exc:
        raise DownloadFailed(f"{what}: no whole answer ({type(exc).__name__})") from None
    with dest.open("rb") as head:
        if head.read(12)[4:8] != b"ftyp":
            raise DownloadRefused(f"{what}: not an MP4 file")
    return total, digest.hexdigest()


def cut_clip(
    footage: Path,
    out: Path,
    key: str,
    span_s: float,
    start_s: float | None,
    size: tuple[int, int],
    fps: int,
) -> float:
    """Writes the scene's clip from downloaded footage to `out` (whole or not at all):
    `span_s` from `start_s` (the footage's middle when None), cropped to 9:16 at `size`.
    Returns the start. DownloadRefused when the footage is shorter than it said or ffmpeg
    cannot read it."""
    made = out.with_name(f".{out.name}.part.mp4")
    try:
        probe = probe_media(str(footage))
        start = trim_start(probe.duration_s, span_s) if start_s is None else start_s
        if probe.duration_s + 0.05 < start + span_s:
            raise DownloadRefused(
                f"{key}: the file lasts {probe.duration_s:.2f} s, not the "
                f"{start + span_s:.2f} s the scene needs"
            )
        width, height = size
        run_tool(
            clip_args(str(footage), str(made), start, span_s, width, height, fps),
            timeout=60.0 + 4.0 * span_s,
        )
        os.replace(made, out)
    except MissingToolError:
        raise
    except MediaToolError as exc:  # a file ffmpeg cannot read is this candidate's
        raise DownloadRefused(f"{key}: unreadable ({exc.reason})") from None
    finally:
        made.unlink(missing_ok=True)
    return start
