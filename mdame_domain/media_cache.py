"""A bounded local cache of content-addressed media, for readers of a remote media store.

Files live at root/<sha[:2]>/<sha><suffix>, the same layout as the local store, so a cache copy
is named by its content and can be checked against its name at every use. Downloads are written
to a temp file in the target folder and moved in with os.replace: a crashed download leaves only
a `.incoming-*` temp file (swept once it is an hour old), never a half file under a real name.

The size cap is enforced after each admission by removing the least recently used files. Use
is recorded in the file's mtime (os.utime at every verified read), because atime is unreliable
on relatime/noatime mounts. Files used in the last `grace_s` seconds are never evicted, so a
render's inputs fetched one after another stay on disk until ffmpeg opened them; the cap is
therefore soft by at most what was used within the grace period.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from mdame_core import settings

DEFAULT_CACHE_BYTES: int = settings.default("MDAME_MEDIA_CACHE_BYTES")
DEFAULT_GRACE_S = 300.0
_STALE_INCOMING_S = 3600.0
_INCOMING = ".incoming-"
_CHUNK_BYTES = 1 << 20


def hash_copy(source: BinaryIO, out: BinaryIO) -> tuple[str, int]:
    """Copies `source` to `out` in chunks; (hex SHA-256, bytes) of what was copied."""
    digest, size = hashlib.sha256(), 0
    while chunk := source.read(_CHUNK_BYTES):
        digest.update(chunk)
        out.write(chunk)
        size += len(chunk)
    return digest.hexdigest(), size


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


class MediaCache:
    """Verified local copies of remote objects, bounded to `max_bytes` (LRU by last use)."""

    def __init__(
        self, root: Path, max_bytes: int = DEFAULT_CACHE_BYTES, grace_s: float = DEFAULT_GRACE_S
    ):
        if max_bytes <= 0:
            raise ValueError(f"the media cache needs a positive size cap, not {max_bytes}")
        self.root = Path(root)
        self.max_bytes = max_bytes
        self.grace_s = grace_s

    def path(self, sha256: str, suffix: str) -> Path:
        return self.root / sha256[:2] / f"{sha256}{suffix}"

    def verified(self, sha256: str, suffix: str) -> Path | None:
        """The cached copy if its bytes still hash to `sha256` (its use is recorded); a copy
        that rotted is removed. None when there is no good copy."""
        path = self.path(sha256, suffix)
        try:
            actual = _sha256(path)
        except FileNotFoundError:
            return None
        if actual != sha256:
            path.unlink(missing_ok=True)
            return None
        self._touch(path)
        return path

    @contextmanager
    def incoming(self, sha256: str, suffix: str) -> Iterator[tuple[BinaryIO, Path]]:
        """A temp file next to the cache copy's place, removed unless admit() moved it in."""
        target = self.path(sha256, suffix)
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, name = tempfile.mkstemp(prefix=_INCOMING, dir=target.parent)
        temp = Path(name)
        try:
            with os.fdopen(handle, "w+b") as out:
                yield out, temp
        finally:
            temp.unlink(missing_ok=True)

    def admit(self, temp: Path, sha256: str, suffix: str) -> Path:
        """Moves a verified temp file in under its content name and enforces the cap."""
        target = self.path(sha256, suffix)
        os.chmod(temp, 0o644)
        os.replace(temp, target)
        self._touch(target)
        self.evict(keep=target)
        return target

    def discard(self, sha256: str, suffix: str) -> None:
        self.path(sha256, suffix).unlink(missing_ok=True)

    def _touch(self, path: Path) -> None:
        with contextlib.suppress(FileNotFoundError):  # evicted by another process meanwhile
            os.utime(path)

    def evict(self, keep: Path | None = None) -> list[Path]:
        """Removes least recently used copies until the cache fits its cap; the removed paths.
        `keep` and copies used within grace_s stay; stale download temp files are swept."""
        now, entries, total = time.time(), [], 0
        if not self.root.is_dir():
            return []
        for folder in self.root.iterdir():
            if not folder.is_dir():
                continue
            for path in folder.iterdir():
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                if path.name.startswith(_INCOMING):
                    if now - stat.st_mtime > _STALE_INCOMING_S:
                        path.unlink(missing_ok=True)
                    continue
                entries.append((stat.st_mtime, stat.st_size, path))
                total += stat.st_size
        removed = []
        for used_at, size, path in sorted(entries, key=lambda e: e[0]):
            if total <= self.max_bytes:
                break
            if path == keep or now - used_at < self.grace_s:
                continue
            path.unlink(missing_ok=True)
            total -= size
            removed.append(path)
        return removed
