"""The offline publishing channel: a local outbox folder per dimension.

An entry is root/<dimension_slug>/<video_id>/{video.mp4, metadata.json}. It is assembled in a
hidden temp folder and renamed into place in one step, so a crash leaves either a whole entry
or none. Publishing the same video again returns the existing entry (idempotent); publishing
different bytes under the same id is a conflict, never an overwrite.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import logging
import os
import re
import shutil
import tempfile
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlsplit

from mdame_domain.channel import ChannelError, SessionState
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
    # A hard link of the render: the outbox held a byte copy of every
    # render. The staged file is hashed below either way.
    link_or_copy(video_path, staging / VIDEO_NAME)
    # The staged copy is what gets published: its bytes must be the ones hashed and approved.
    if (staged := sha256_file(staging / VIDEO_NAME)) != document["sha256"]:
        raise ContentMismatch(
            f"video {document['video_id']}: the copy to publish has SHA-256 {staged[:12]}, "
            f"not the approved {document['sha256'][:12]}; nothing published"
        )
    names = [VIDEO_NAME, METADATA_NAME]
    if thumbnail is not None:  # the channel's thumbnail, next to the video
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


# ------------------------------------------------------------------------------------------
# The outbox as a channel: the same resumable protocol as YouTube's (mdame_domain.channel)
# ------------------------------------------------------------------------------------------
SESSIONS = ".sessions"  # root/.sessions/<session id>/{session.json, data.part}
SESSION_NAME = "session.json"
PART_NAME = "data.part"
SESSION_MAX_AGE_S = 7 * 24 * 3600.0  # YouTube forgets a session after about a week
PAGE_SIZE = 50


class OutboxChannel:
    """One dimension's outbox folder speaking the resumable channel protocol.

    A session is a folder under root/.sessions holding the request (the video resource and
    the size) and the bytes received so far. Once it holds every byte, the entry is published
    atomically (publish_to_outbox) under an id derived from the session, so a completion that
    crashed half way completes again to the same entry; the session's status query then
    answers with the video. A session that no longer exists is 'gone', and the uploads list
    (newest first, with each entry's description) is searched for the publication's marker,
    as on YouTube. Only one holder sends to a session at a time (the database's lease)."""

    def __init__(self, root: Path, dimension_slug: str) -> None:
        _check_component("dimension_slug", dimension_slug)
        self.root = Path(root).resolve()
        self.dimension_slug = dimension_slug

    # -- sessions ----------------------------------------------------------------------------
    def initiate(self, body: dict[str, Any], notify_subscribers: bool, size: int, mime: str) -> str:
        if size <= 0:
            raise ChannelError("outbox initiate", 400, "badContent")
        sessions = self.root / SESSIONS
        sessions.mkdir(parents=True, exist_ok=True)
        _forget_old_sessions(sessions)
        folder = sessions / uuid.uuid4().hex
        folder.mkdir()
        request = {
            "dimension": self.dimension_slug,
            "video_id": outbox_video_id(folder.name),
            "body": body,
            "notify_subscribers": notify_subscribers,
            "size": size,
            "mime": mime,
        }
        _write_json(folder / SESSION_NAME, request)
        return folder.as_uri()

    def query(self, session_uri: str, size: int) -> SessionState:
        session = self._session(session_uri)
        if session is None:
            return SessionState(gone=True)
        folder, request = session
        return self._state(folder, request)

    def send_chunk(self, session_uri: str, data: bytes, start: int, size: int) -> SessionState:
        session = self._session(session_uri)
        if session is None:
            return SessionState(gone=True)
        folder, request = session
        if size != request["size"] or start + len(data) > size:
            raise ChannelError("outbox chunk", 400, "badContentRange")
        if self._entry(request) is not None:
            return self._state(folder, request)
        part = folder / PART_NAME
        held = part.stat().st_size if part.exists() else 0
        if start != held:  # the session holds another prefix: resume from what it holds
            return SessionState(next_byte=held)
        with open(part, "ab") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return self._state(folder, request)

    def _state(self, folder: Path, request: dict[str, Any]) -> SessionState:
        if (entry := self._entry(request)) is not None:
            return SessionState(video=_resource(entry))
        part = folder / PART_NAME
        held = part.stat().st_size if part.exists() else 0
        if held < request["size"]:
            return SessionState(next_byte=held)
        return SessionState(video=_resource(self._complete(part, request)))

    def _complete(self, part: Path, request: dict[str, Any]) -> OutboxEntry:
        body = request["body"]
        snippet, status = body.get("snippet", {}), body.get("status", {})
        metadata = {
            "title": snippet.get("title", ""),
            "description": snippet.get("description", ""),
            "dimension": self.dimension_slug,
            "snippet": snippet,
            "status": status,
            "published_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        entry = publish_to_outbox(
            self.root, self.dimension_slug, request["video_id"], part, metadata
        )
        part.unlink(missing_ok=True)  # the entry holds the bytes (a hard link where it can)
        return entry

    def _entry(self, request: dict[str, Any]) -> OutboxEntry | None:
        folder = self.root / self.dimension_slug / request["video_id"]
        return _entry(folder) if (folder / METADATA_NAME).is_file() else None

    def _session(self, session_uri: str) -> tuple[Path, dict[str, Any]] | None:
        """The session's folder and request; None when it does not exist (here)."""
        url = urlsplit(session_uri)
        folder = Path(unquote(url.path))
        if url.scheme != "file" or folder.parent != self.root / SESSIONS:
            return None
        try:
            request = json.loads((folder / SESSION_NAME).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if request.get("dimension") != self.dimension_slug:
            return None
        return folder, request

    # -- reads ---------------------------------------------------------------------------
    def uploads_playlist(self) -> str:
        return f"outbox:{self.dimension_slug}"

    def playlist_page(self, playlist_id: str, page_token: str | None) -> dict[str, Any]:
        if playlist_id != self.uploads_playlist():
            raise ChannelError("outbox playlistItems.list", 404, "playlistNotFound")
        entries = sorted(
            (e for e in list_outbox(self.root) if e.folder.parent.name == self.dimension_slug),
            key=lambda e: (_read_metadata(e).get("published_at", ""), e.video_id),
            reverse=True,
        )
        offset = int(page_token or 0)
        page = entries[offset : offset + PAGE_SIZE]
        items = [
            {
                "snippet": {
                    "title": (meta := _read_metadata(e)).get("title", ""),
                    "description": meta.get("description", ""),
                },
                "contentDetails": {"videoId": e.video_id},
            }
            for e in page
        ]
        got: dict[str, Any] = {"items": items}
        if offset + PAGE_SIZE < len(entries):
            got["nextPageToken"] = str(offset + PAGE_SIZE)
        return got

    def videos(self, video_ids: list[str], part: str) -> list[dict[str, Any]]:
        """The resources of the ids this channel has (others are left out, as on YouTube)."""
        found = []
        for video_id in video_ids:
            if not _PATH_COMPONENT.match(video_id):
                continue
            folder = self.root / self.dimension_slug / video_id
            if (folder / METADATA_NAME).is_file():
                found.append(_resource(_entry(folder)))
        return found

    def set_thumbnail(self, video_id: str, jpeg: Path) -> dict[str, Any]:
        folder = self.root / self.dimension_slug / video_id
        if not _PATH_COMPONENT.match(video_id) or not (folder / METADATA_NAME).is_file():
            raise ChannelError("outbox thumbnails.set", 404, "videoNotFound")
        staged = folder / f"{_TEMP_PREFIX}{THUMBNAIL_NAME}"
        shutil.copyfile(jpeg, staged)
        os.replace(staged, folder / THUMBNAIL_NAME)
        document = {**_read_metadata(_entry(folder)), "thumbnail_sha256": sha256_file(jpeg)}
        _write_json(folder / METADATA_NAME, document)
        return {"items": [{"default": {"url": (folder / THUMBNAIL_NAME).as_uri()}}]}


def _resource(entry: OutboxEntry) -> dict[str, Any]:
    meta = _read_metadata(entry)
    snippet = {"title": meta.get("title", ""), "description": meta.get("description", "")}
    return {
        "id": entry.video_id,
        "snippet": {**meta.get("snippet", {}), **snippet},
        "status": {"uploadStatus": "processed", **meta.get("status", {})},
        "processingDetails": {"processingStatus": "succeeded"},
    }


def _read_metadata(entry: OutboxEntry) -> dict[str, Any]:
    try:
        document = json.loads(entry.metadata_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return document if isinstance(document, dict) else {}


def _write_json(path: Path, document: dict[str, Any]) -> None:
    """Replaces `path` in one step (a crash leaves the old or the new file, never half)."""
    staged = path.with_name(f"{_TEMP_PREFIX}{path.name}")
    text = json.dumps(document, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    with open(staged, "w", encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(staged, path)


def _forget_old_sessions(sessions: Path) -> None:
    cutoff = time.time() - SESSION_MAX_AGE_S
    for folder in sessions.iterdir():
        with contextlib.suppress(OSError):
            if folder.stat().st_mtime < cutoff:
                shutil.rmtree(folder, ignore_errors=True)
