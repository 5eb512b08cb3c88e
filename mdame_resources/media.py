"""Where media bytes live: a content-addressed store, and the folder the outbox channel uses."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

import dagster as dg

from mdame_core import settings
from mdame_core.settings import mdame_home
from mdame_core.state import MediaCollected, StateStore
from mdame_domain.media_store import LocalMediaStore, MediaStore
from mdame_domain.media_url import MEDIA_URL_ENV, LocalMediaUrl, parse_media_url
from mdame_domain.scratch import owned_dir, scratch_space, sweep_scratch


class MediaStoreResource(dg.ConfigurableResource):
    """The content-addressed media store; rows hold its URI and the SHA-256. `url` picks the
    backend (see mdame_domain/media_url.py): empty means $MDAME_MEDIA_URL, and when that is
    unset too, the local folder `root` ($MDAME_MEDIA_ROOT, else $MDAME_HOME/media)."""

    root: str = ""  # empty: $MDAME_MEDIA_ROOT, else $MDAME_HOME/media
    url: str = ""  # empty: $MDAME_MEDIA_URL; s3://bucket/prefix?endpoint_url=... for shared media

    def store(self) -> MediaStore:
        parsed = parse_media_url(self.url or settings.raw(MEDIA_URL_ENV))
        if isinstance(parsed, LocalMediaUrl):
            return LocalMediaStore(Path(parsed.path) if parsed.path else media_root(self.root))
        from mdame_resources.media_s3 import s3_media_store  # boto3 only where S3 is used

        return s3_media_store(parsed, media_cache_dir(), media_cache_bytes())

    def scratch_dir(self, name: str) -> Path:
        """This process's work folder for step `name` (intermediate files, never a source of
        truth): $MDAME_HOME/scratch/<name>/<host>~<pid>~<start>. What a killed process left
        there is swept when a step next asks for scratch space (mdame_domain/scratch.py)."""
        _sweep_now_and_then()
        return owned_dir(scratch_root(), name)

    @contextlib.contextmanager
    def scratch_space(self, name: str) -> Iterator[Path]:
        """A fresh folder under this process's scratch for step `name`, removed on success
        and on failure."""
        _sweep_now_and_then()
        with scratch_space(scratch_root(), name) as path:
            yield path


T = TypeVar("T")


def name_stored(
    state: StateStore,
    store: MediaStore,
    record: Callable[[], T],
    sources: Sequence[tuple[Path, str]],
) -> T:
    """Runs `record`, the call whose row names objects put_file stored from `sources` (path,
    suffix). When housekeeping collected one of them after put_file found it still there
    (MD010), the bytes are stored again from the sources and the row recorded once more. A
    collection still under way (MD003) is left to the step's retry."""
    try:
        return record()
    except MediaCollected:
        for path, suffix in sources:
            store.put_file(path, suffix, registry=state)
        return record()


def scratch_root() -> Path:
    return mdame_home() / "scratch"


# One sweep per process a minute at most: a step asking for scratch space many times (a clip
# per scene) need not list the folders each time.
SWEEP_EVERY_S = 60.0
_last_sweep: dict[str, float] = {}


def _sweep_now_and_then() -> None:
    root = scratch_root()
    now = time.monotonic()
    if now - _last_sweep.get(str(root), -SWEEP_EVERY_S) < SWEEP_EVERY_S:
        return
    _last_sweep[str(root)] = now
    sweep_scratch(root)


MEDIA_ROOT_ENV = "MDAME_MEDIA_ROOT"
MEDIA_CACHE_BYTES_ENV = "MDAME_MEDIA_CACHE_BYTES"


def media_root(configured: str = "") -> Path:
    """The store's folder. MDAME_MEDIA_ROOT lets several homes share one store (the crash
    harness: content-addressed files and derived-output memos are valid across databases)."""
    return Path(configured or settings.raw(MEDIA_ROOT_ENV) or mdame_home() / "media")


def media_cache_dir() -> Path:
    """Where a remote store's readers keep verified copies: $MDAME_HOME/media-cache."""
    return mdame_home() / "media-cache"


def media_cache_bytes() -> int:
    """The cache's size cap in bytes: $MDAME_MEDIA_CACHE_BYTES, default 4 GiB."""
    try:
        return int(settings.get(MEDIA_CACHE_BYTES_ENV))
    except settings.SettingsError as exc:
        raise ValueError(str(exc)) from None
