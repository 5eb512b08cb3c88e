"""The typed results of the state store's RPCs and reads: frozen dataclasses, one per kind of
row or answer."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, NewType
from uuid import UUID

from mdame_domain.credentials import StoredGrant

# A pipeline lock's token: its public fence number, recorded with the work done under it.
LockToken = NewType("LockToken", int)
# The secret its holder proves itself with in every fenced call: the database keeps only its
# SHA-256, and it is never logged nor shown.
LockSecret = NewType("LockSecret", int)


@dataclass(frozen=True)
class LockGrant:
    """An acquired pipeline lock: its public token and the holder's secret (kept out of repr)."""

    token: LockToken
    secret: LockSecret = field(repr=False)


@dataclass(frozen=True)
class Job:
    """A job claimed under a lease; complete/heartbeat/fail it as (id, worker_id, attempt) with
    the lease's secret, which only its claim is told (kept out of the repr: never logged)."""

    id: int
    job_type: str
    idempotency_key: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int
    lease_expires_at: datetime
    worker_id: str
    lease_secret: int = field(repr=False)

    @property
    def lease(self) -> tuple[int, str, int, int]:
        """The lease arguments every job RPC takes: job id, worker id, attempt, secret."""
        return (self.id, self.worker_id, self.attempt, self.lease_secret)


@dataclass(frozen=True)
class SceneClaim:
    """claim_scene_job's answer. `outcome`: claimed (then `job` is set), held (another
    worker's live lease on this job), scene_busy (a live lease on another job of the same
    scene_hash), not_due (a retry delay runs), or the job's final state: succeeded, failed,
    dead. `holder` and `wait_s` say who holds it and for how long yet."""

    outcome: str
    job_id: int
    payload: dict[str, Any]
    result: dict[str, Any]
    attempt: int
    max_attempts: int
    holder: str | None
    wait_s: float
    job: Job | None


@dataclass(frozen=True)
class JobRecord:
    id: int
    job_type: str
    idempotency_key: str
    state: str
    payload: dict[str, Any]
    result: dict[str, Any]
    attempt: int
    max_attempts: int
    lease_owner: str | None
    lease_expires_at: datetime | None
    last_error: str | None


@dataclass(frozen=True)
class CacheEntry:
    uri: str
    content_sha256: str
    expires_at: datetime
    # What made the clip (engine, relevance, source): a cache hit's scene carries it.
    detail: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class CollectableMedia:
    """Stored media the retention policy lets go: state is
    'collectable', or 'collecting' for one a stopped run began and the next must finish."""

    uri: str
    kind: str  # clip, voice, render or thumbnail
    reason: str
    state: str


@dataclass(frozen=True)
class CollectionStart:
    """begin_media_collection's answer: whether to delete the bytes now, and why (or not)."""

    collect: bool
    kind: str | None
    reason: str


@dataclass(frozen=True)
class MediaCollectionMark:
    """An object's collection record: 'collecting' (collected_at None) or 'collected'."""

    state: str
    collected_at: datetime | None


@dataclass(frozen=True)
class AlertRecord:
    """record_alert's answer: `deliver` says the caller holds the alert's
    delivery claim and must send it, then mark it delivered or failed with `claim_token`."""

    alert_id: int
    fresh: bool  # the first occurrence of this dimension, cause and day
    deliver: bool
    claim_token: UUID | None  # the claim's; None unless `deliver`


@dataclass(frozen=True)
class PendingAlert:
    """An undelivered alert the sweep claimed (claim_undelivered_alerts), and the claim's token
    that settles it (mark_alert_delivered, mark_alert_failed, renew_alert_claim)."""

    alert_id: int
    dimension: str | None  # None: the global chat
    cause: str
    day: date
    text: str
    attempts: int
    claim_token: UUID


@dataclass(frozen=True)
class FeedCacheEntry:
    """A trend source's last full response: its validators and items."""

    etag: str | None
    last_modified: str | None
    items: list[dict[str, Any]]
    fetched_at: datetime


@dataclass(frozen=True)
class WorkUnit:
    kind: str
    id: int
    idempotency_key: str
    state: str
    payload: dict[str, Any]
    result: dict[str, Any]
    attempts: int
    created_at: datetime
    updated_at: datetime
    refs: dict[str, Any] = field(default_factory=dict)  # natural FK columns: dimension_id, ...


@dataclass(frozen=True)
class Event:
    id: int
    subject_kind: str
    subject_id: int
    event: str
    from_state: str | None
    to_state: str | None
    detail: dict[str, Any]
    created_at: datetime


@dataclass(frozen=True)
class Attempt:
    id: int
    work_key: str
    attempt_no: int
    provider: str
    request_hash: str
    status: str
    detail: dict[str, Any]


@dataclass(frozen=True)
class BudgetUsage:
    scope: str
    period: str
    cap_micros: int
    reserved_micros: int
    settled_micros: int

    @property
    def remaining_micros(self) -> int:
        return self.cap_micros - self.reserved_micros - self.settled_micros


@dataclass(frozen=True)
class QuotaUsage:
    account_id: int
    day: date
    cap_units: int
    reserved_units: int
    committed_units: int

    @property
    def remaining_units(self) -> int:
        return self.cap_units - self.reserved_units - self.committed_units


@dataclass(frozen=True)
class Dimension:
    id: int
    slug: str
    title: str
    config: dict[str, Any]
    active: bool


@dataclass(frozen=True)
class Account:
    id: int
    dimension_id: int
    platform: str
    handle: str
    daily_quota_units: int
    active: bool
    quota_timezone: str = "America/Los_Angeles"  # the provider's quota day (YouTube: Pacific)
    daily_posts: int = 100  # uploads it may start a quota day (the ledger's insert bucket)
    # The platform name it was registered under where it was renamed since (an `outbox` account
    # is a youtube one now); None: its platform.
    registered_as: str | None = None

    @property
    def key_platform(self) -> str:
        """The platform name its publication keys and its sealed grant are derived with: the
        one it was registered under, so a renamed account's videos are never published again
        and its grant still opens."""
        return self.registered_as or self.platform


@dataclass(frozen=True)
class VoiceHalt:
    """A script halted because voice failed on every provider, and when it may retry (no cap
    on halts, a permanent cause, the retry window's close)."""

    script_id: int
    halts: int
    max_halts: int | None  # only on halts recorded before halts were uncapped
    last_reason: str
    halted_at: datetime
    next_retry_at: datetime | None
    permanent: bool = False
    retry_until: datetime | None = None


@dataclass(frozen=True)
class PartitionWork:
    """A day x dimension with scripts waiting in some states (what the hop sensors poll)."""

    partition_date: date
    dimension_slug: str
    last_update: datetime
    scripts: int
    # Until when its work waits (reads.WORK_WAIT: a killed run's upload or Gemini call whose
    # answer may still come, a gone session's second search); None when nothing waits.
    waits_until: datetime | None = None


@dataclass(frozen=True)
class UploadStart:
    """begin_upload's answer. action: 'published' (done), 'no_quota' (nothing reserved),
    'skipped' (the account is paused or needs re-authorisation: nothing reserved),
    'reconcile' (attempt_id's outcome must be settled first) or 'submit' (upload, then
    finish_upload(attempt_id))."""

    publication_id: int
    action: str
    attempt_id: int | None


@dataclass(frozen=True)
class UploadSession:
    """A resumable upload session committed before its first byte; the session columns
    are None when the attempt never got one (then no byte was sent)."""

    attempt_id: int
    session_uri: str | None
    content_sha256: str | None
    size_bytes: int | None


@dataclass(frozen=True)
class AccountStatus:
    needs_reauth: bool
    paused_until: datetime | None
    pause_reason: str | None
    has_credential: bool


@dataclass(frozen=True)
class MasterKeyState:
    """The master key the database's grants are under (None: no grant stored yet), the one the
    last rotation replaced and when, and the database's clock when this was read."""

    current_key_id: str | None
    previous_key_id: str | None
    rotated_at: datetime | None
    read_at: datetime


@dataclass(frozen=True, repr=False)
class StoredCredential:
    """An account's stored grant (ciphertext only) as a reader needs it: the data key wrapped by
    `key_id`, and by `previous_key_id` too while the last rotation's copy is kept."""

    key_id: str
    wrapped_key: bytes
    ciphertext: bytes
    previous_key_id: str | None
    previous_wrapped_key: bytes | None
    keys: MasterKeyState

    def __repr__(self) -> str:
        return f"StoredCredential(key_id={self.key_id}, previous_key_id={self.previous_key_id})"

    def grant(self) -> StoredGrant:
        """What mdame_domain.credentials.open_stored_grant opens."""
        return StoredGrant.of(
            self.key_id,
            self.wrapped_key,
            self.ciphertext,
            self.previous_key_id,
            self.previous_wrapped_key,
            self.keys.rotated_at,
            self.keys.read_at,
        )


@dataclass(frozen=True)
class PaidCallStart:
    """begin_paid_call's answer. action: 'submit' (call now, then settle/release/refuse/mark
    unknown attempt_id), 'done' (the same request already succeeded: `result` is its stored
    answer), 'budget_exhausted' (nothing reserved: the dimension's daily cap is reached),
    'in_flight' (another holder's call of this work key may still be running), 'refused' (a
    permanent refusal stands until re-armed: `result` is its stored cause) or
    'attempts_exhausted' (billed failures reached the cap: `result` has the last error;
    on 'submit' it has the count so far)."""

    action: str
    attempt_id: int | None
    budget_key: str | None
    period: str | None
    result: Any


@dataclass(frozen=True)
class RearmedCall:
    """A paid-call refusal an operator lifted (rearm_paid_calls)."""

    refusal_id: int
    scope: str  # 'request', 'model' or 'key'
    provider: str
    work_key: str
    day: date
    cause: dict[str, Any]


@dataclass(frozen=True)
class LockInfo:
    lock_name: str
    holder: str
    token: LockToken
    expires_at: datetime
    released: bool


@dataclass(frozen=True)
class ParamSet:
    """One version of a dimension's tuned parameters."""

    dimension: str
    version: int
    parent_version: int | None
    week_start: date
    effective_from: date
    params: dict[str, Any]
    limits: dict[str, Any]
    changes: list[Any]
    explanation: str
    created_at: datetime
    rolled_back_at: datetime | None
    rollback_reason: str | None


@dataclass(frozen=True)
class VideoStat:
    """One publication's channel counters as read on one day."""

    publication_id: int
    day: date
    dimension_id: int
    video_id: str
    views: int
    likes: int
    comments: int
    fetched_at: datetime


@dataclass(frozen=True)
class PublishedVideo:
    """A published publication, what the analytics asset reads statistics for."""

    publication_id: int
    dimension_id: int
    account_id: int
    platform: str
    video_id: str
    published_at: datetime
    partition_date: date  # the day the video was made for
    keywords: tuple[str, ...]


@dataclass(frozen=True)
class Report:
    """The Strategic Auditor's report of one dimension and week; week_start a Monday."""

    id: int
    dimension_id: int
    week_start: date
    metrics: dict[str, Any]
    markdown: str
    images: list[dict[str, Any]]
    revision: int
    created_at: datetime
    updated_at: datetime
