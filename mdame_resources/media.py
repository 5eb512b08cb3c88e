"""Where media bytes live: a content-addressed store, and the folder the outbox channel uses."""

from __future__ import annotations

import os
from pathlib import Path

import dagster as dg

from mdame_core.settings import mdame_home
from mdame_domain.media_cache import DEFAULT_CACHE_BYTES
from mdame_domain.media_store import LocalMediaStore, MediaStore
from mdame_domain.media_url import MEDIA_URL_ENV, LocalMediaUrl, parse_media_url


class MediaStoreResource(dg.ConfigurableResource):
    """The content-addressed media store; rows hold its URI and the SHA-256. `url` picks the
    backend (see mdame_domain/media_url.py): empty means $MDAME_MEDIA_URL, and when that is
    unset too, the local folder `root` ($MDAME_MEDIA_ROOT, else $MDAME_HOME/media)."""

    root: str = ""  # empty: $MDAME_MEDIA_ROOT, else $MDAME_HOME/media
    url: str = ""  # empty: $MDAME_MEDIA_URL; s3://bucket/prefix?endpoint_url=... for shared media

    def store(self) -> MediaStore:
        parsed = parse_media_url(self.url or os.environ.get(MEDIA_URL_ENV, ""))
        if isinstance(parsed, LocalMediaUrl):
            return LocalMediaStore(Path(parsed.path) if parsed.path else media_root(self.root))
        from mdame_resources.media_s3 import s3_media_store  # boto3 only where S3 is used

        return s3_media_store(parsed, media_cache_dir(), media_cache_bytes())

    def scratch_dir(self, name: str) -> Path:
        """A per-step work folder for intermediate files (never a source of truth)."""
        path = mdame_home() / "scratch" / name
        path.mkdir(parents=True, exist_ok=True)
        return path


MEDIA_ROOT_ENV = "MDAME_MEDIA_ROOT"
MEDIA_CACHE_BYTES_ENV = "MDAME_MEDIA_CACHE_BYTES"


def media_root(configured: str = "") -> Path:
    """The store's folder. MDAME_MEDIA_ROOT lets several homes share one store (the crash
    harness: content-addressed files and derived-output memos are valid across databases)."""
    return Path(configured or os.environ.get(MEDIA_ROOT_ENV) or mdame_home() / "media")


def media_cache_dir() -> Path:
    """Where a remote store's readers keep verified copies: $MDAME_HOME/media-cache."""
    return mdame_home() / "media-cache"


def media_cache_bytes() -> int:
    """The cache's size cap in bytes: $MDAME_MEDIA_CACHE_BYTES, default 4 GiB."""
    raw = os.environ.get(MEDIA_CACHE_BYTES_ENV, "").strip()
    if not raw:
        return DEFAULT_CACHE_BYTES
    try:
        value = int(raw)
    except ValueError:
        value = 0
    if value <= 0:
        raise ValueError(f"{MEDIA_CACHE_BYTES_ENV} must be a positive whole number of bytes")
    return value
