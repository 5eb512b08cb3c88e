"""What the publications stage hands the publisher (UploadJob), and what the publisher raises
when a publication must wait."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdame_core.state import Account, StateStore
from mdame_domain.waits import NotYet


class StatisticsUnavailable(Exception):
    """The channel did not answer a statistics read (quota exhausted, a refused grant, an API
    error): this account's counters wait for the next read."""


class AccountUnavailable(Exception):
    """The account may not be published to now (paused by the channel, its grant revoked or
    missing): nothing is half published, the publication waits."""


class UploadUnsettled(NotYet):
    """The upload's session is gone and the channel's uploads do not list it (yet): it may have
    completed, its answer lost. Nothing more is sent; the attempt is left 'unknown' and a later
    run searches again, from `until`, before it is settled."""


class UploadInFlight(NotYet):
    """Another holder (a killed run) submitted this upload and its lease still runs: its answer
    can still arrive until then, so the upload is taken over only after `until`."""


@dataclass
class UploadJob:
    """One publication's upload, handed to the publisher by the publications stage.

    `state` is the stage's fenced store: every RPC the publisher makes goes through it.
    `attempt_id` is the attempt begin_bucket_upload just recorded ('submit'), or None to take
    over the publication's unsettled upload ('reconcile'). `settle_only`: take it over only to
    learn its outcome, never sending another byte (an account no longer published to).
    `progress(sent, total)` is called after every chunk the channel confirmed."""

    state: StateStore
    dimension_slug: str
    work_key: str
    publication_id: int
    account: Account
    attempt_id: int | None
    video: Path
    sha256: str
    body: dict[str, Any]  # the validated videos.insert resource (snippet, status)
    notify_subscribers: bool
    marker: str
    checkpoint: Callable[[], None]
    log: Callable[..., None]
    progress: Callable[[int, int], None] = lambda sent, total: None
    current_attempt: int | None = None  # the attempt this holder is driving
    thumbnail: Path | None = None  # the render's thumbnail JPEG, set once published
    settle_only: bool = False
