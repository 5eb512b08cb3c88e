"""A content-addressed media store: the `MediaStore` interface and its local-folder backend.

Objects are named by URI media://sha256/<sha><suffix>: a row names content, not a location, so
rows stay valid whichever backend holds the bytes (the S3 backend is
mdame_resources/media_s3.py). Local files live at root/<sha[:2]>/<sha><suffix>. Writes go to a
temp file in the target directory and are moved in with os.replace, so readers never see half a
file and storing the same bytes twice is a no-op.

Retention deletes objects the database says nothing needs (sql/functions/retention.sql). A
writer that found an object still there and skipped storing it may name it after housekeeping
deleted its bytes; the database refuses that (MD010), and put_file with the state as `registry`
stores the bytes again whatever the store holds and records that they are back.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol, runtime_checkable

from mdame_domain.timing import spent

URI_PREFIX = "media://sha256/"
_CHUNK_BYTES = 1 << 20
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
# A short extension only: the suffix becomes part of a path and must not escape the store.
_SUFFIX = re.compile(r"^(\.[A-Za-z0-9]{1,10})?$")
_URI = re.compile(r"^media://sha256/([0-9a-f]{64})((?:\.[A-Za-z0-9]{1,10})?)$")
# Each try stores the bytes again after a collection; only a collector finishing yet another
# collection of the same object in between makes a try count for nothing.
_STORE_AGAIN_TRIES = 3


@dataclass(frozen=True)
class StoredMedia:
    uri: str
    sha256: str
    size: int
    path: Path


def sha256_file(path: str | os.PathLike[str]) -> str:
    """Hex SHA-256 of a file, read in chunks so large videos do not fill memory."""
    digest = hashlib.sha256()
    with spent("hashing and copies"), open(path, "rb") as handle:
        while chunk := handle.read(_CHUNK_BYTES):
            digest.update(chunk)
    return digest.hexdigest()


def media_uri(sha256: str, suffix: str = "") -> str:
    _check_sha(sha256)
    _check_suffix(suffix)
    return f"{URI_PREFIX}{sha256}{suffix}"


def parse_media_uri(uri: str) -> tuple[str, str]:
    """(sha256, suffix) of a media:// URI; ValueError for anything else."""
    match = _URI.match(uri)
    if not match:
        raise ValueError(f"not a media URI like {URI_PREFIX}<sha256>.mp4: {uri!r}")
    return match.group(1), match.group(2)


def _check_sha(sha256: str) -> None:
    if not _SHA256_HEX.match(sha256):
        raise ValueError(f"not a lowercase hex SHA-256: {sha256!r}")


def _check_suffix(suffix: str) -> None:
    if not _SUFFIX.match(suffix):
        raise ValueError(f"suffix must look like '.mp4' (or be empty): {suffix!r}")


class MediaProblem(RuntimeError):
    """A stored object is missing or its bytes changed: what it stood for must be made again."""


class CollectionMark(Protocol):
    """An object's collection record (mdame_core.state.MediaCollectionMark)."""

    @property
    def state(self) -> str: ...  # 'collecting' or 'collected'

    @property
    def collected_at(self) -> datetime | None: ...


class MediaRegistry(Protocol):
    """What put_file needs of the database to store a collected object again (the
    StateStore): its collection record, and recording that its bytes are back."""

    def media_collection_mark(self, uri: str) -> CollectionMark | None: ...

    def media_stored_again(self, uri: str, collected_at: datetime) -> bool: ...


def put_registered(
    uri: str,
    registry: MediaRegistry | None,
    put: Callable[[bool], StoredMedia],
    fresh: bool = False,
) -> StoredMedia:
    """Runs a store's `put(fresh)` for `uri`. An object housekeeping collected is written
    fresh (a copy still found there may be deleted by that collection's collector) and then
    re-registered, so rows may name it again. One being collected is stored as usual: a row
    naming it is refused until the collection is over, and the writer then tries again."""
    if registry is None:
        return put(fresh)
    for _ in range(_STORE_AGAIN_TRIES):
        mark = registry.media_collection_mark(uri)
        if mark is None or mark.state != "collected" or mark.collected_at is None:
            return put(fresh)
        stored = put(True)
        if registry.media_stored_again(uri, mark.collected_at):
            return stored
    raise MediaProblem(
        f"{uri} was collected again each of the {_STORE_AGAIN_TRIES} times it was stored again"
    )


@runtime_checkable
class MediaStore(Protocol):
    """What the pipeline needs of a media store, whichever backend holds the bytes.

    Rows hold the URI and SHA-256 that put_file returned; put_file returns only once the stored
    bytes were verified to hash to the name. Readers that need bytes on disk (ffmpeg, the
    publisher) call verified_path: a local path whose bytes were checked against the name. A
    remote backend's local paths are cache copies, so no path is kept beyond one use."""

    def put_file(
        self,
        path: str | os.PathLike[str],
        suffix: str = "",
        *,
        fresh: bool = False,
        registry: MediaRegistry | None = None,
    ) -> StoredMedia:
        """Store `path`'s bytes; the same bytes give the same URI. `.path` of the result is a
        local copy of the verified bytes (valid for immediate use only on remote backends).
        An object already there is kept unless `fresh`. A writer whose row will name the
        object passes its state as `registry`: a collected object is then stored fresh and
        re-registered (see put_registered)."""
        ...

    def problem(self, uri: str, sha256: str | None = None) -> str | None:
        """Why the object behind `uri` cannot be trusted (missing, or bytes that do not hash to
        its name or to `sha256`), or None. A store that cannot be reached raises instead: an
        outage is not damage, and damage triggers regeneration."""
        ...

    def verified_path(self, uri: str, sha256: str | None = None) -> Path:
        """A local path holding `uri`'s bytes, checked against its name; MediaProblem if not."""
        ...

    def exists(self, sha256: str) -> bool:
        """Whether an object with this content hash is stored (whatever its suffix)."""
        ...

    def location(self, uri: str) -> str:
        """Where the bytes of `uri` live, for people (a path, or s3://bucket/key)."""
        ...

    def find_derived(self, kind: str, inputs_digest: str) -> StoredMedia | None:
        """The intact stored output of a deterministic step for these inputs, or None."""
        ...

    def remember_derived(self, kind: str, inputs_digest: str, stored: StoredMedia) -> None:
        """Record that `stored` is the output of `kind` for these inputs."""
        ...

    def delete(self, uri: str) -> int | None:
        """Removes the object (retention: only once the database agreed nothing needs it).
        Returns the bytes it held, or None when it was already gone (deleting twice is fine)."""
        ...


class LocalMediaStore:
    """Content-addressed files under one root directory (the embedded default MediaStore)."""

    def __init__(self, root: Path):
        self.root = Path(root)

    def _path(self, sha256: str, suffix: str) -> Path:
        return self.root / sha256[:2] / f"{sha256}{suffix}"

    def put_file(
        self,
        path: str | os.PathLike[str],
        suffix: str = "",
        *,
        fresh: bool = False,
        registry: MediaRegistry | None = None,
    ) -> StoredMedia:
        """Store a copy of `path`; the same bytes always give the same URI and one copy."""
        _check_suffix(suffix)
        sha256 = sha256_file(path)
        target = self._path(sha256, suffix)
        uri = media_uri(sha256, suffix)

        def put(fresh: bool) -> StoredMedia:
            if fresh or not (target.exists() and target.stat().st_size == os.path.getsize(path)):
                self._write_atomically(Path(path), target)
            return StoredMedia(uri=uri, sha256=sha256, size=target.stat().st_size, path=target)

        return put_registered(uri, registry, put, fresh)

    def _write_atomically(self, source: Path, target: Path) -> None:
        target.parent.mkdir(parents=True, exist_ok=True)
        handle, temp_name = tempfile.mkstemp(prefix=".incoming-", dir=target.parent)
        try:
            with (
                spent("hashing and copies"),
                os.fdopen(handle, "wb") as out,
                open(source, "rb") as src,
            ):
                shutil.copyfileobj(src, out, _CHUNK_BYTES)
                out.flush()
                os.fsync(out.fileno())
            os.chmod(temp_name, 0o644)
            os.replace(temp_name, target)
        except BaseException:
            Path(temp_name).unlink(missing_ok=True)
            raise

    def path_for(self, uri: str) -> Path:
        """Local path of a stored URI (whether or not the file is present)."""
        sha256, suffix = parse_media_uri(uri)
        return self._path(sha256, suffix)

    def problem(self, uri: str, sha256: str | None = None) -> str | None:
        """Why the object behind `uri` cannot be trusted (missing, or its bytes no longer hash
        to its name or to the expected `sha256`), or None when it is intact. Reading a file
        back for use goes through this: media vanishes and rots, the database does not know."""
        expected, _ = parse_media_uri(uri)
        if sha256 is not None and sha256 != expected:
            return f"{uri} is recorded with SHA-256 {sha256[:12]}, not its name's"
        path = self.path_for(uri)
        if not path.is_file():
            return f"{uri} is missing from the media store"
        actual = sha256_file(path)
        if actual != expected:
            return f"{uri} is corrupt: its bytes hash to {actual[:12]}"
        return None

    def verified_path(self, uri: str, sha256: str | None = None) -> Path:
        """The local path of `uri` after checking its bytes; MediaProblem when it fails."""
        problem = self.problem(uri, sha256)
        if problem is not None:
            raise MediaProblem(problem)
        return self.path_for(uri)

    def location(self, uri: str) -> str:
        return str(self.path_for(uri))

    def exists(self, sha256: str) -> bool:
        """Whether any file with this content hash is stored (whatever its suffix)."""
        _check_sha(sha256)
        folder = self.root / sha256[:2]
        return folder.is_dir() and any(folder.glob(f"{sha256}*"))

    def delete(self, uri: str) -> int | None:
        path = self.path_for(uri)
        try:
            size = path.stat().st_size
            path.unlink()
        except FileNotFoundError:
            return None
        return size

    # -- derived outputs -------------------------------------------------------------------
    # A deterministic step (a render) whose output is already stored for the same inputs need
    # not run again: a rerun after a crash between ffmpeg and the database row reuses the file.
    def _derived_path(self, kind: str, inputs_digest: str) -> Path:
        _check_sha(inputs_digest)
        return self.root / "derived" / kind / inputs_digest

    def find_derived(self, kind: str, inputs_digest: str) -> StoredMedia | None:
        marker = self._derived_path(kind, inputs_digest)
        if not marker.exists():
            return None
        uri = marker.read_text(encoding="utf-8").strip()
        if self.problem(uri) is not None:  # vanished or rotted: derive it again
            return None
        path = self.path_for(uri)
        sha256, _ = parse_media_uri(uri)
        return StoredMedia(uri=uri, sha256=sha256, size=path.stat().st_size, path=path)

    def remember_derived(self, kind: str, inputs_digest: str, stored: StoredMedia) -> None:
        marker = self._derived_path(kind, inputs_digest)
        marker.parent.mkdir(parents=True, exist_ok=True)
        temp = marker.with_name(f".{marker.name}.tmp")
        temp.write_text(stored.uri, encoding="utf-8")
        os.replace(temp, marker)
