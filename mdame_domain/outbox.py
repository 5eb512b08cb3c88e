"""The offline publishing channel: a local outbox folder per dimension.

An entry is root/<dimension_slug>/<video_id>/{video.mp4, metadata.json}. It is assembled in a
hidden temp folder and renamed into place in one step, so a crash leaves either a whole entry
or none. Publishing the same video again returns the existing entry (idempotent); publishing
different bytes under the same id is a conflict, never an overwrite.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdame_domain.media_store import sha256_file

VIDEO_NAME = "video.mp4"
METADATA_NAME = "metadata.json"
THUMBNAIL_NAME = "thumbnail.jpg"
_TEMP_PREFIX = ".tmp-"
# Slugs and ids become folder names: letters, digits, '-' and '_' only, no leading dot.
_PATH_COMPONENT = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$")


class OutboxConflict(RuntimeError):
    """An outbox entry already exists for this video id with different content."""


class ContentMismatch(RuntimeError):
    """The bytes about to be published are not the approved ones: nothing is published."""


@dataclass(frozen=True)
class OutboxEntry:
    video_id: str
    folder: Path
    video_path: Path
    metadata_path: Path


def outbox_video_id(script_key: str) -> str:
    """A deterministic 11-character id (YouTube's alphabet and length) for a script key."""
    if not script_key:
        raise ValueError("script_key must not be empty")
    digest = hashlib.sha256(f"mdame-outbox:{script_key}".encode()).digest()
    return base64.urlsafe_b64encode(digest).decode("ascii")[:11]


def _check_component(kind: str, value: str) -> None:
    if not _PATH_COMPONENT.match(value) or value in {".", ".."}:
        raise ValueError(f"{kind} must be letters, digits, '-', '_' or '.': {value!r}")


def _entry(folder: Path) -> OutboxEntry:
    return OutboxEntry(
        video_id=folder.name,
        folder=folder,
        video_path=folder / VIDEO_NAME,
        metadata_path=folder / METADATA_NAME,
    )


def _existing_sha256(folder: Path) -> str | None:
    try:
        return json.loads((folder / METADATA_NAME).read_text(encoding="utf-8")).get("sha256")
    except (OSError, ValueError):
        return None


def _resolve_existing(folder: Path, sha256: str) -> OutboxEntry:
    existing = _existing_sha256(folder)
    if existing != sha256:
        raise OutboxConflict(
            f"outbox entry {folder} already holds different content "
            f"(sha256 {existing or 'unknown'}, new {sha256})"
        )
    return _entry(folder)


def link_or_copy(source: Path, target: Path) -> bool:
    """`target` becomes a hard link of `source` (no second copy of the bytes on disk); across
    filesystems, or where links are refused, a byte copy, with a warning once per process.
    True when linked. Safe for the store's files: the store never writes a file in place (it
    replaces or deletes), and every reader re-hashes what it is about to publish."""
    try:
        os.link(source, target)
        return True
    except OSError as exc:
        if not _warned_copy:
            _warned_copy.append(True)
            _log.warning(
                "outbox: cannot hard-link %s into %s (%s); copying bytes instead, which uses "
                "the space twice: keep the outbox and the media store on one filesystem",
                source,
                target.parent,
                exc.strerror or type(exc).__name__,
            )
    shutil.copyfile(source, target)
    return False


_log = logging.getLogger(__name__)
_warned_copy: list[bool] = []


def _write_entry(
    staging: Path, video_path: Path, document: dict[str, Any], thumbnail: Path | None = None
) -> None:
    # A hard link of the render (issue 12, retention): the outbox held a byte copy of every
    # render. The staged file is hashed below either way.
    link_or_copy(video_path, staging / VIDEO_NAME)
    # The staged copy is what gets published: its bytes must be the ones hashed and approved.
    if (staged := sha256_file(staging / VIDEO_NAME)) != document["sha256"]:
        raise ContentMismatch(
            f"video {document['video_id']}: the copy to publish has SHA-256 {staged[:12]}, "
            f"not the approved {document['sha256'][:12]}; nothing published"
        )
    names = [VIDEO_NAME, METADATA_NAME]
    if thumbnail is not None:  # issue 11: the channel's thumbnail, next to the video
        link_or_copy(thumbnail, staging / THUMBNAIL_NAME)
        document = {**document, "thumbnail_sha256": sha256_file(staging / THUMBNAIL_NAME)}
        names.append(THUMBNAIL_NAME)
    metadata = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False)
    (staging / METADATA_NAME).write_text(metadata + "\n", encoding="utf-8")
    for name in names:
        with open(staging / name, "rb") as handle:
            os.fsync(handle.fileno())


def publish_to_outbox(
    root: Path,
    dimension_slug: str,
    video_id: str,
    video_path: Path,
    metadata: dict[str, Any],
    thumbnail: Path | None = None,
) -> OutboxEntry:
    """Publish a video into the outbox; metadata must carry the caller's `published_at`.
    When it carries `render_sha256` (the approved bytes), any other bytes are refused
    (ContentMismatch), and nothing is published."""
    _check_component("dimension_slug", dimension_slug)
    _check_component("video_id", video_id)
    if "published_at" not in metadata:
        # The clock belongs to the caller, so re-runs write the same metadata.
        raise ValueError("metadata must include 'published_at'")
    sha256 = metadata.get("render_sha256") or sha256_file(video_path)
    dimension_dir = Path(root) / dimension_slug
    folder = dimension_dir / video_id
    if folder.exists():
        return _resolve_existing(folder, sha256)
    dimension_dir.mkdir(parents=True, exist_ok=True)
    document = {**metadata, "video_id": video_id, "sha256": sha256}
    staging = Path(tempfile.mkdtemp(prefix=f"{_TEMP_PREFIX}{video_id}-", dir=dimension_dir))
    try:
        _write_entry(staging, Path(video_path), document, thumbnail)
        try:
            os.rename(staging, folder)
        except OSError:
            # Another publisher won the race: same bytes is fine, anything else a conflict.
            if folder.exists():
                return _resolve_existing(folder, sha256)
            raise
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
    return _entry(folder)


def list_outbox(root: Path) -> list[OutboxEntry]:
    """Every complete entry, ordered by dimension then video id (temp folders are skipped)."""
    root = Path(root)
    if not root.is_dir():
        return []
    entries: list[OutboxEntry] = []
    for dimension_dir in sorted(p for p in root.iterdir() if p.is_dir()):
        if dimension_dir.name.startswith("."):
            continue
        for folder in sorted(p for p in dimension_dir.iterdir() if p.is_dir()):
            if not folder.name.startswith(".") and (folder / METADATA_NAME).is_file():
                entries.append(_entry(folder))
    return entries
