"""The state-store client: typed calls of the mdame.* RPCs over a psycopg connection pool.

State changes go through exactly one choke point, `StateStore.call`, which runs each RPC as one
autocommit statement (SELECT * FROM mdame.<rpc>(...)): the function body is the transaction, so a
call costs one round trip. Reads are plain SELECTs. The client refuses a database of another ENV
and always acts as the application role, which can call functions and read tables but never
write them directly.

Errors raised on purpose by the RPCs (SQLSTATE class MD, message 'mdame: ...') and any other
error the server reports for a call become `StateError` subclasses carrying the SQLSTATE; a lost
connection (psycopg.OperationalError) propagates unchanged, because then the outcome of the call
is unknown and the caller must re-read before retrying. A NUL character in a text argument, or
anywhere inside a JSON argument, is refused here (InvalidInput, MD001) before anything is sent:
PostgreSQL text cannot hold it.

JSON arguments (payloads, details, results, configs) are limited to 256 KiB of text each.

`set_commit_observer` is the one injection point for fault-injection tests (the crash harness
under tests/): it is told just before each RPC statement is sent and once its result has come
back. Production code never sets it.
"""

from __future__ import annotations

import copy
import re
import select
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any, Literal, NewType
from uuid import UUID

import psycopg
from psycopg.types.json import Jsonb
from psycopg_pool import ConnectionPool

from mdame_core.settings import (
    ADMIN_ROLE,
    APP_ROLE,
    ENVIRONMENTS,
    SettingsError,
    database_url,
    mdame_env,
)
from mdame_domain.credentials import StoredGrant

LockToken = NewType("LockToken", int)
JsonObject = Mapping[str, Any]

_RPC_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")

# ------------------------------------------------------------------------------------------
# The commit observer: the injection point of fault-injection tests
# ------------------------------------------------------------------------------------------
CommitObserver = Callable[[str, str], None]
_commit_observer: CommitObserver | None = None


def set_commit_observer(observer: CommitObserver | None) -> None:
    """Process-wide: `observer(rpc, "before")` runs just before an RPC statement is sent,
    `observer(rpc, "after")` once its result has come back (the call committed; a refused call
    gets no "after"). None removes it. For tests only (the crash harness installs a crash point
    with it); production code never sets it."""
    global _commit_observer
    _commit_observer = observer


# ------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------
class EnvironmentMismatch(RuntimeError):
    """The database belongs to another ENV (or records none): the client refuses to use it."""


class StateError(Exception):
    """An RPC refused the call; nothing was changed. `sqlstate` says why (class MD: ours)."""

    def __init__(self, rpc: str, message: str, sqlstate: str | None = None) -> None:
        super().__init__(f"{rpc}: {message}")
        self.rpc = rpc
        self.message = message
        self.sqlstate = sqlstate


class InvalidInput(StateError):
    """MD001: NULL or empty key, unknown kind, negative amount, oversized JSON, ..."""


class IdempotencyConflict(StateError):
    """MD002: an idempotency key was reused with different content."""


class StateConflict(StateError):
    """MD003: the row is not in the expected state, or the transition is not allowed."""


class LeaseLost(StateError):
    """MD004: a job lease or a lock fencing token is no longer ours."""


class ReconcileRequired(StateError):
    """MD005: the last provider attempt's outcome is unknown; reconcile before retrying."""


class NotFound(StateError):
    """MD006: the row the call refers to does not exist."""


class Fenced(LeaseLost):
    """MD007: the caller's pipeline-lock token is not (or no longer) the live one."""


class RetryNotDue(StateConflict):
    """MD009: a retry was asked for before its backoff expired."""


class MediaCollected(StateConflict):
    """MD010: a row would name stored media that housekeeping collected (its bytes were
    deleted): store the bytes again with put_file(..., registry=state) first."""


class FenceLost(Fenced):
    """Raised before anything is sent: this holder knows its lock is lost (taken over, or not
    renewed before its lease ran out), so it makes no further call."""

    def __init__(self, lock_name: str, reason: str) -> None:
        super().__init__("fence", f"lock {lock_name} lost: {reason}", "MD007")


_ERRORS: dict[str, type[StateError]] = {
    "MD001": InvalidInput,
    "MD002": IdempotencyConflict,
    "MD003": StateConflict,
    "MD004": LeaseLost,
    "MD005": ReconcileRequired,
    "MD006": NotFound,
    "MD007": Fenced,
    "MD009": RetryNotDue,
    "MD010": MediaCollected,
}


# ------------------------------------------------------------------------------------------
# Typed results
# ------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Job:
    """A job claimed under a lease; complete/heartbeat/fail with (id, worker_id, attempt)."""

    id: int
    job_type: str
    idempotency_key: str
    payload: dict[str, Any]
    attempt: int
    max_attempts: int
    lease_expires_at: datetime
    worker_id: str


@dataclass(frozen=True)
class SceneClaim:
    """claim_scene_job's answer (0013). `outcome`: claimed (then `job` is set), held (another
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


@dataclass(frozen=True)
class VoiceHalt:
    """A script halted because voice failed on every provider, and when it may retry (0009;
    0022: no cap on halts, a permanent cause, the retry window's close)."""

    script_id: int
    halts: int
    max_halts: int | None  # only on halts recorded before 0022
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


@dataclass(frozen=True)
class UploadStart:
    """begin_upload's answer. action: 'published' (done), 'no_quota' (nothing reserved),
    'skipped' (the account is paused or needs re-authorisation: nothing reserved; 0012),
    'reconcile' (attempt_id's outcome must be settled first) or 'submit' (upload, then
    finish_upload(attempt_id))."""

    publication_id: int
    action: str
    attempt_id: int | None


@dataclass(frozen=True)
class UploadSession:
    """A resumable upload session committed before its first byte (0012); the session columns
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
    """One version of a dimension's tuned parameters (0017, slice "adaptive")."""

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
    """One publication's channel counters as read on one day (0016, issue 12 analytics)."""

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
    """The Strategic Auditor's report of one dimension and week (0016); week_start a Monday."""

    id: int
    dimension_id: int
    week_start: date
    metrics: dict[str, Any]
    markdown: str
    images: list[dict[str, Any]]
    revision: int
    created_at: datetime
    updated_at: datetime


_SHARED_COLUMNS = (
    "id",
    "kind",
    "idempotency_key",
    "state",
    "payload",
    "result",
    "attempts",
    "created_at",
    "updated_at",
)


def _json(value: Any) -> Jsonb | None:
    """Wrap for a jsonb parameter; None stays NULL (the RPC then refuses it)."""
    return None if value is None else Jsonb(value)


def _obj(value: JsonObject | None) -> Jsonb:
    """An optional detail/result object: absent means {}."""
    return Jsonb(dict(value) if value is not None else {})


# ------------------------------------------------------------------------------------------
# The fence: a pipeline lock held by this process
# ------------------------------------------------------------------------------------------
class Fence:
    """The pipeline lock a writer holds: its token, and whether it is known to be lost.

    Fenced RPCs carry the token and the database refuses them once the lock moved on. On this
    side, `check()` refuses before anything is sent once the lock is known lost (a heartbeat was
    refused) or could not be renewed before its lease ran out (the database unreachable): the
    holder makes no further call and no further side effect.
    """

    def __init__(self, lock_name: str, holder: str, token: int, ttl_s: float) -> None:
        self.lock_name, self.holder, self.token, self.ttl_s = lock_name, holder, token, ttl_s
        self._deadline = time.monotonic() + ttl_s  # the lease, measured from before acquiring
        self._lost: str | None = None
        self._guard = threading.Lock()

    def renewed(self, sent_at: float) -> None:
        """A heartbeat sent at `sent_at` (time.monotonic()) succeeded."""
        with self._guard:
            if self._lost is None:
                self._deadline = max(self._deadline, sent_at + self.ttl_s)

    def lose(self, reason: str) -> None:
        with self._guard:
            self._lost = self._lost or reason

    @property
    def deadline(self) -> float:
        return self._deadline

    @property
    def lost(self) -> str | None:
        with self._guard:
            if self._lost is None and time.monotonic() >= self._deadline:
                self._lost = f"not renewed within its {self.ttl_s:g}s lease"
            return self._lost

    def check(self) -> None:
        reason = self.lost
        if reason is not None:
            raise FenceLost(self.lock_name, reason)


# ------------------------------------------------------------------------------------------
# The client
# ------------------------------------------------------------------------------------------
class StateStore:
    """Pool-backed client of the mdame RPCs, acting as the application role, or, for the
    operator's commands, as the admin role (role="admin")."""

    def __init__(
        self,
        url: str | None = None,
        *,
        role: Literal["app", "admin"] = "app",
        env: str | None = None,
        pool_max: int = 4,
        pool_min: int = 1,
        statement_timeout_ms: int = 30_000,
        connect_timeout_s: float = 30.0,
    ) -> None:
        self.role = role
        self._role_name = ADMIN_ROLE if role == "admin" else APP_ROLE
        self.url = url or database_url(role)
        self.env = env if env is not None else mdame_env()
        if self.env not in ENVIRONMENTS:
            raise EnvironmentMismatch(f"ENV must be one of {ENVIRONMENTS}, not {self.env!r}")
        self._statement_timeout_ms = statement_timeout_ms
        self._fence: Fence | None = None  # set on the views that fenced() returns
        self._kinds: dict[str, tuple[str, tuple[str, ...]]] = {}
        self._queries: dict[tuple[str, int], str] = {}
        self._argnames: dict[tuple[str, int], tuple[str, ...]] = {}
        # Check once on a plain connection so a mismatch raises here instead of making the pool
        # retry in the background; the pool's configure hook checks every later connection too.
        timeout = int(connect_timeout_s)
        with psycopg.connect(self.url, autocommit=True, connect_timeout=timeout) as conn:
            self._prepare(conn)
        self._pool = ConnectionPool(
            self.url,
            min_size=max(1, pool_min),
            max_size=max(1, pool_min, pool_max),
            kwargs={"autocommit": True},  # each RPC is one statement, its own transaction
            configure=self._prepare,
            check=_check_idle,
            open=False,
            name="mdame-state",
        )
        self._pool.open(wait=True, timeout=connect_timeout_s)

    # -- connections ---------------------------------------------------------------------
    def _prepare(self, conn: psycopg.Connection) -> None:
        """Act as the app role, bound statement time, and refuse a database of another ENV.

        Outside dev the login itself must be the app role: a SET ROLE from another login can be
        undone with RESET ROLE by any code that holds the connection.
        """
        if self.role == "admin":
            # The admin URL is the operator's (the owner's, by default): acting as the narrower
            # admin role keeps operator commands to the admin RPCs.
            if conn.info.user != ADMIN_ROLE:
                try:
                    conn.execute(f"SET ROLE {ADMIN_ROLE}")
                except psycopg.errors.InsufficientPrivilege as exc:
                    raise SettingsError(
                        f"{conn.info.user} cannot act as {ADMIN_ROLE}: GRANT {ADMIN_ROLE} TO "
                        f"{conn.info.user}, or set MDAME_ADMIN_DATABASE_URL to a login of it"
                    ) from exc
        elif conn.info.user != APP_ROLE:
            if self.env != "dev":
                raise SettingsError(
                    f"ENV={self.env}: the client must log in as {APP_ROLE} "
                    f"(MDAME_APP_DATABASE_URL), not as {conn.info.user}; connecting as another "
                    f"role and SET ROLE {APP_ROLE} is only allowed with ENV=dev"
                )
            try:
                conn.execute(f"SET ROLE {APP_ROLE}")
            except psycopg.errors.InsufficientPrivilege as exc:
                raise SettingsError(
                    f"{conn.info.user} cannot act as {APP_ROLE}: "
                    f"GRANT {APP_ROLE} TO {conn.info.user}, or connect as {APP_ROLE}"
                ) from exc
        conn.execute(f"SET statement_timeout = {int(self._statement_timeout_ms)}")
        try:
            row = conn.execute("SELECT env FROM mdame.environment").fetchone()
        except psycopg.errors.UndefinedTable as exc:
            raise EnvironmentMismatch(
                "the database has no mdame.environment: run `mdame db migrate` first"
            ) from exc
        recorded = row[0] if row else None
        if recorded != self.env:
            raise EnvironmentMismatch(
                f"the database belongs to ENV={recorded}, this process runs with ENV={self.env}"
            )

    def close(self) -> None:
        self._pool.close()

    def fenced(self, fence: Fence) -> StateStore:
        """A view of this client that writes under `fence`: the fenced RPCs carry its token, and
        every call first checks that the lock is not known lost. It shares this client's pool;
        close the client, not the view."""
        view = copy.copy(self)
        view._fence = fence
        return view

    @property
    def fence(self) -> Fence | None:
        return self._fence

    @property
    def lock_token(self) -> int:
        """The token of the lock this view writes under (RuntimeError on an unfenced client)."""
        return self._token()

    def _token(self) -> int:
        if self._fence is None:
            raise RuntimeError(
                "this call changes a partition's work and needs the pipeline lock: "
                "make it on state.fenced(fence)"
            )
        return self._fence.token

    def _fenced_tail(self) -> tuple[int, ...]:
        """The lock token as the last argument on the app's fenced view; nothing on an unfenced
        or admin client (the unfenced RPC versions are the admin role's)."""
        return () if self._fence is None or self.role == "admin" else (self._fence.token,)

    def __enter__(self) -> StateStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- the choke point -----------------------------------------------------------------
    def call(self, rpc: str, *args: Any) -> list[tuple[Any, ...]]:
        """Run one RPC as a single autocommit statement and return its rows.

        Every state change passes here, which is what lets a test's commit observer stop the
        process right before the n-th call of an RPC is sent, or right after it committed.
        """
        if self._fence is not None:
            self._fence.check()
        query = self._query(rpc, len(args))
        self._refuse_nul(rpc, args)
        observer = _commit_observer
        with self._pool.connection() as conn:
            if observer is not None:
                observer(rpc, "before")
            try:
                rows = conn.execute(query, args).fetchall()
            except psycopg.Error as exc:
                mapped = _mapped(rpc, exc)
                if mapped is None:
                    raise  # connection lost: outcome unknown, re-read before retrying
                raise mapped from exc
        if observer is not None:
            observer(rpc, "after")
        return rows

    def _refuse_nul(self, rpc: str, args: Sequence[Any]) -> None:
        """InvalidInput naming the parameter (and JSON path) of the first NUL character."""
        for index, arg in enumerate(args):
            where = _nul_path(arg.obj if isinstance(arg, Jsonb) else arg, "$")
            if where is None:
                continue
            name = self._argname(rpc, len(args), index)
            at = "" if where == "$" else f" at {where}"
            raise InvalidInput(rpc, f"{name} contains a NUL character{at}", "MD001")

    def _argname(self, rpc: str, nargs: int, index: int) -> str:
        """The RPC's parameter name (pg_proc.proargnames of the function a call with `nargs`
        arguments resolves to), read once per RPC and argument count, on first need."""
        key = (rpc, nargs)
        if key not in self._argnames:
            rows = self._select(
                """SELECT coalesce(proargnames, '{}')::text[] FROM pg_proc
                    WHERE pronamespace = 'mdame'::regnamespace AND proname = %s
                      AND pronargs >= %s AND pronargs - pronargdefaults <= %s
                    ORDER BY pronargs LIMIT 1""",
                [rpc, nargs, nargs],
            )
            self._argnames[key] = tuple(rows[0][0]) if rows else ()
        names = self._argnames[key]
        return names[index] if index < len(names) and names[index] else f"${index + 1}"

    def _query(self, rpc: str, nargs: int) -> str:
        key = (rpc, nargs)
        query = self._queries.get(key)
        if query is None:
            if not _RPC_NAME.match(rpc):
                raise ValueError(f"not an RPC name: {rpc!r}")
            placeholders = ", ".join(["%s"] * nargs)
            query = self._queries[key] = f"SELECT * FROM mdame.{rpc}({placeholders})"
        return query

    def _scalar(self, rpc: str, *args: Any) -> Any:
        rows = self.call(rpc, *args)
        return rows[0][0] if rows else None

    def _select(
        self, query: str, args: Sequence[Any] | Mapping[str, Any] = ()
    ) -> list[tuple[Any, ...]]:
        """Reads: one autocommit SELECT, never a write (the role could not write anyway)."""
        if self._fence is not None:
            self._fence.check()
        with self._pool.connection() as conn:
            return conn.execute(query, args).fetchall()

    # -- locks and runs ------------------------------------------------------------------
    def acquire_pipeline_lock(
        self, lock_name: str, holder: str, ttl_seconds: int
    ) -> LockToken | None:
        """A fencing token (strictly increasing), or None while a live holder has the lock."""
        token = self._scalar("acquire_pipeline_lock", lock_name, holder, ttl_seconds)
        return None if token is None else LockToken(token)

    def heartbeat_pipeline_lock(
        self, lock_name: str, holder: str, token: int, ttl_seconds: int | None = None
    ) -> datetime:
        """Extends the lease; raises LeaseLost for an old token. Returns the new expiry."""
        return self._scalar("heartbeat_pipeline_lock", lock_name, holder, token, ttl_seconds)

    def release_pipeline_lock(self, lock_name: str, holder: str, token: int) -> bool:
        """True: released now; False: already released by this token; LeaseLost: old token."""
        return self._scalar("release_pipeline_lock", lock_name, holder, token)

    def start_pipeline_run(
        self,
        execution_id: UUID | str,
        dimension_slug: str | None,
        partition_key: str,
        lock_token: int | None,
    ) -> int:
        return self._scalar(
            "start_pipeline_run", _uuid(execution_id), dimension_slug, partition_key, lock_token
        )

    def finish_pipeline_run(
        self, execution_id: UUID | str, status: str, detail: JsonObject | None = None
    ) -> bool:
        return self._scalar("finish_pipeline_run", _uuid(execution_id), status, _obj(detail))

    # -- dimensions ----------------------------------------------------------------------
    def upsert_dimension(
        self, slug: str, title: str, config: JsonObject | None = None, active: bool = True
    ) -> int:
        return self._scalar("upsert_dimension", slug, title, _obj(config), active)

    def set_dimensions_active(self, active_slugs: Sequence[str]) -> int:
        """Exactly the listed dimensions are active; returns how many flags changed."""
        return self._scalar("set_dimensions_active", list(active_slugs))

    def upsert_dimension_account(
        self,
        dimension_slug: str,
        platform: str,
        handle: str,
        daily_quota_units: int,
        active: bool = True,
        quota_timezone: str = "America/Los_Angeles",
    ) -> int:
        return self._scalar(
            "upsert_dimension_account",
            dimension_slug,
            platform,
            handle,
            daily_quota_units,
            active,
            quota_timezone,
        )

    def set_dimension_accounts_active(
        self, dimension_slug: str, accounts: Sequence[tuple[str, str]]
    ) -> int:
        """Exactly the listed (platform, handle) accounts of the dimension are active; accounts
        of other dimensions are untouched. Returns how many flags changed."""
        listed = [{"platform": platform, "handle": handle} for platform, handle in accounts]
        return self._scalar("set_dimension_accounts_active", dimension_slug, Jsonb(listed))

    # -- work units ----------------------------------------------------------------------
    def upsert_work_unit(self, kind: str, idempotency_key: str, payload: JsonObject) -> int:
        """Creates the unit once per key (same key and payload: same id; other payload: raises)."""
        return self._scalar(
            "upsert_work_unit", kind, idempotency_key, _json(payload), self._token()
        )

    def transition(
        self,
        kind: str,
        unit_id: int,
        from_state: str,
        to_state: str,
        detail: JsonObject | None = None,
    ) -> int:
        """Checked move from_state -> to_state, detail merged into result; returns the event id."""
        return self._scalar(
            "transition", kind, unit_id, from_state, to_state, _obj(detail), self._token()
        )

    def bump_work_attempt(self, kind: str, unit_id: int, detail: JsonObject | None = None) -> int:
        return self._scalar("bump_work_attempt", kind, unit_id, _obj(detail), self._token())

    # -- jobs ----------------------------------------------------------------------------
    def enqueue_job(
        self,
        job_type: str,
        idempotency_key: str,
        payload: JsonObject,
        max_attempts: int = 3,
        priority: int = 100,
        delay_seconds: int = 0,
        partition_key: str | None = None,
    ) -> int:
        """The job's id, once per key; `partition_key` scopes it to one partition's claims."""
        return self._scalar(
            "enqueue_job",
            job_type,
            idempotency_key,
            _json(payload),
            max_attempts,
            priority,
            delay_seconds,
            partition_key,
        )

    def claim_job(
        self, job_type: str, worker_id: str, lease_seconds: int, partition_key: str | None = None
    ) -> Job | None:
        """The next runnable job under a lease, or None. With `partition_key`, only that
        partition's jobs; without, any partition's. The generic queue pull: the product no
        longer calls it (scene steps claim their own job, claim_scene_job); bench/queue.py
        measures it."""
        rows = self.call("claim_job", job_type, worker_id, lease_seconds, partition_key)
        if not rows:
            return None
        job_id, job_type_, key, payload, attempt, max_attempts, lease_expires_at = rows[0]
        return Job(
            job_id, job_type_, key, payload, attempt, max_attempts, lease_expires_at, worker_id
        )

    def heartbeat_job(
        self, job_id: int, worker_id: str, attempt: int, lease_seconds: int = 60
    ) -> datetime:
        return self._scalar("heartbeat_job", job_id, worker_id, attempt, lease_seconds)

    def complete_job(
        self, job_id: int, worker_id: str, attempt: int, result: JsonObject | None = None
    ) -> bool:
        """True: completed now; False: this lease had already completed it; LeaseLost: lost."""
        return self._scalar("complete_job", job_id, worker_id, attempt, _obj(result))

    def fail_job(
        self,
        job_id: int,
        worker_id: str,
        attempt: int,
        error: str,
        retryable: bool,
        retry_delay_seconds: int = 0,
    ) -> str:
        """Returns the job's new state: queued, dead (retries used up) or failed."""
        return self._scalar(
            "fail_job", job_id, worker_id, attempt, error, retryable, retry_delay_seconds
        )

    def reap_expired_jobs(self, job_type: str | None = None) -> int:
        return self._scalar("reap_expired_jobs", job_type)

    def claim_scene_job(self, job_key: str, worker_id: str, lease_seconds: int) -> SceneClaim:
        """A scene step claims its own scene's job by key, under a generation lease: refused
        (not raised) while another live worker holds this job or another job of the same
        scene_hash. Not fenced by the pipeline lock: the job lease is the fence."""
        [row] = self.call("claim_scene_job", job_key, worker_id, lease_seconds)
        outcome, job_id, job_type, payload, result, attempt, max_attempts, expires, holder, wait = (
            row
        )
        job = None
        if outcome == "claimed":
            job = Job(job_id, job_type, job_key, payload, attempt, max_attempts, expires, worker_id)
        return SceneClaim(
            outcome, job_id, payload, result, attempt, max_attempts, holder, float(wait), job
        )

    # -- scene cache ---------------------------------------------------------------------
    def lookup_scene_cache(self, scene_hash: str) -> CacheEntry | None:
        rows = self.call("lookup_scene_cache", scene_hash)
        return CacheEntry(*rows[0]) if rows else None

    def put_scene_cache(
        self, scene_hash: str, uri: str, content_sha256: str, ttl_seconds: int
    ) -> CacheEntry:
        """Returns the entry in effect (a live entry of another writer wins)."""
        rows = self.call("put_scene_cache", scene_hash, uri, content_sha256, ttl_seconds)
        return CacheEntry(*rows[0])

    def invalidate_scene_cache(
        self, scene_hash: str, uri: str, reason: str, job: Job | None = None
    ) -> bool:
        """Drops the entry naming `uri` (its file is missing or corrupt); True if dropped.
        The pipeline calls it on a fenced view, a GPU worker under the lease of the `job` that
        makes the scene; unfenced and without a job, it is the admin's."""
        if job is not None:
            lease = (job.id, job.worker_id, job.attempt)
            return self._scalar("invalidate_scene_cache", scene_hash, uri, reason, *lease)
        return self._scalar("invalidate_scene_cache", scene_hash, uri, reason, *self._fenced_tail())

    # -- media retention -------------------------------
    def collectable_media(self, policy: JsonObject, limit: int = 10_000) -> list[CollectableMedia]:
        """Media nothing needs under `policy` (RetentionPolicy.to_json()); ones left
        'collecting' by a stopped run first. Read-only: begin_media_collection decides."""
        rows = self.call("collectable_media", _json(dict(policy)), limit)
        return [CollectableMedia(*row) for row in rows]

    def begin_media_collection(self, uri: str, policy: JsonObject, holder: str) -> CollectionStart:
        """Marks `uri` 'collecting' if nothing needs it now (no row can start naming it until
        it is finished or abandoned)."""
        rows = self.call("begin_media_collection", uri, _json(dict(policy)), holder)
        return CollectionStart(*rows[0])

    def finish_media_collection(self, uri: str, freed_bytes: int) -> bool:
        """The bytes are gone: 'collected', and the expired cache entries naming it dropped.
        False when it was already collected; NotFound when it was never begun."""
        return bool(self._scalar("finish_media_collection", uri, freed_bytes))

    def media_collection_mark(self, uri: str) -> MediaCollectionMark | None:
        """The object's collection record, or None when it has none (rows may name it)."""
        rows = self.call("media_collection_mark", uri)
        return MediaCollectionMark(*rows[0]) if rows else None

    def media_stored_again(self, uri: str, collected_at: datetime) -> bool:
        """The bytes were stored again after the collection `media_collection_mark` showed
        (collected at `collected_at`): rows may name the object again. False when it was
        collected again since (store it again); StateConflict while it is being collected."""
        return bool(self._scalar("media_stored_again", uri, collected_at))

    def abandon_media_collection(self, uri: str) -> bool:
        """The bytes could not be deleted and are still there: the mark goes."""
        return bool(self._scalar("abandon_media_collection", uri))

    # -- budgets and quotas --------------------------------------------------------------
    def set_budget_cap(self, scope: str, period: str, cap_micros: int) -> int:
        return self._scalar("set_budget_cap", scope, period, cap_micros)

    def reserve_budget(
        self, scope: str, period: str, amount_micros: int, attempt_key: str
    ) -> int | None:
        """The ledger id, or None when the amount does not fit under the cap."""
        return self._scalar("reserve_budget", scope, period, amount_micros, attempt_key)

    def settle_budget(self, attempt_key: str, actual_micros: int) -> int:
        return self._scalar("settle_budget", attempt_key, actual_micros)

    def release_budget(self, attempt_key: str) -> bool:
        return self._scalar("release_budget", attempt_key)

    def reserve_quota(self, account_id: int, units: int, quota_key: str) -> int | None:
        """The ledger id, or None when the units do not fit in the account's quota for its
        current quota day (today in the account's quota_timezone, whatever partition runs)."""
        return self._scalar("reserve_quota", account_id, units, quota_key)

    def commit_quota(self, quota_key: str) -> int:
        return self._scalar("commit_quota", quota_key, *self._fenced_tail())

    def release_quota(self, quota_key: str) -> bool:
        return self._scalar("release_quota", quota_key, *self._fenced_tail())

    # -- provider attempts ---------------------------------------------------------------
    def record_attempt(
        self,
        work_key: str,
        provider: str,
        request_hash: str,
        status: str,
        detail: JsonObject | None = None,
        grace_seconds: int = 0,
    ) -> int:
        """The attempt id; ReconcileRequired while the last attempt's outcome is unknown. The
        attempt is leased to this lock holder until its lock's expiry plus `grace_seconds`."""
        return self._scalar(
            "record_attempt",
            work_key,
            provider,
            request_hash,
            status,
            _obj(detail),
            self._token(),
            grace_seconds,
        )

    def finish_attempt(self, attempt_id: int, status: str, detail: JsonObject | None = None) -> str:
        return self._scalar("finish_attempt", attempt_id, status, _obj(detail), self._token())

    def reconcile_attempt(
        self,
        attempt_id: int,
        final_status: str,
        detail: JsonObject | None = None,
        asked_at: datetime | None = None,
    ) -> str:
        """Settles an unknown outcome from the provider's answer, asked at `asked_at` (the
        database's clock, `db_now()`, read before asking)."""
        return self._scalar(
            "reconcile_attempt", attempt_id, final_status, _obj(detail), self._token(), asked_at
        )

    # -- paid provider calls: budget and attempt ledgers together (0008) -------------------
    def begin_paid_call(
        self,
        dimension_slug: str,
        work_key: str,
        provider: str,
        request_hash: str,
        estimate_micros: int,
        daily_cap_micros: int | None,
        max_attempts: int,
        grace_seconds: int,
        detail: JsonObject | None = None,
    ) -> PaidCallStart:
        """Settles an unknown earlier attempt at its estimate, then reserves and records this
        one (see PaidCallStart)."""
        rows = self.call(
            "begin_paid_call",
            dimension_slug,
            work_key,
            provider,
            request_hash,
            estimate_micros,
            daily_cap_micros,
            max_attempts,
            grace_seconds,
            _obj(detail),
            self._token(),
        )
        return PaidCallStart(*rows[0])

    def settle_paid_call(
        self, attempt_id: int, status: str, actual_micros: int, detail: JsonObject | None = None
    ) -> int:
        """The provider answered: settle at the actual cost; the micros settled."""
        return self._scalar(
            "settle_paid_call", attempt_id, status, actual_micros, _obj(detail), self._token()
        )

    def release_paid_call(self, attempt_id: int, detail: JsonObject | None = None) -> bool:
        """A definite refusal: the reservation is released and the attempt failed."""
        return self._scalar("release_paid_call", attempt_id, _obj(detail), self._token())

    def mark_paid_call_unknown(self, attempt_id: int, detail: JsonObject | None = None) -> str:
        """No answer after sending: the reservation stays held for a later run to settle."""
        return self._scalar("mark_paid_call_unknown", attempt_id, _obj(detail), self._token())

    def refuse_paid_call(self, attempt_id: int, scope: str, cause: JsonObject) -> tuple[int, bool]:
        """A permanent refusal (400, 401/403, 404): released, and recorded so that
        begin_paid_call answers 'refused' for `scope` ('request', 'model' or 'key') until it is
        re-armed. (refusal_id, fresh); a repeat returns the same refusal, not fresh."""
        rows = self.call("refuse_paid_call", attempt_id, scope, _obj(cause), self._token())
        return int(rows[0][0]), bool(rows[0][1])

    def rearm_paid_calls(
        self, dimension_slug: str, day: date | None = None, reason: str = "re-armed"
    ) -> list[RearmedCall]:
        """Lifts the dimension's open refusals (those refused on `day`, when given): the next
        run sends those calls again. NotFound for an unknown dimension."""
        rows = self.call("rearm_paid_calls", dimension_slug, day, reason)
        return [RearmedCall(*row) for row in rows]

    # -- reviews and safety --------------------------------------------------------------
    def record_review(
        self,
        render_id: int,
        content_sha256: str,
        check_name: str,
        verdict: str,
        detail: JsonObject | None = None,
    ) -> int:
        return self._scalar(
            "record_review",
            render_id,
            content_sha256,
            check_name,
            verdict,
            _obj(detail),
            self._token(),
        )

    def is_approved(
        self, render_id: int, content_sha256: str, required_checks: Sequence[str] | None
    ) -> bool:
        """True when every required check (and every check recorded) approved exactly this
        file, and no later review is of another file."""
        checks = None if required_checks is None else list(required_checks)
        return self._scalar("is_approved", render_id, content_sha256, checks)

    def log_safety_decision(
        self,
        subject_kind: str,
        subject_key: str,
        dimension_slug: str | None,
        verdict: str,
        rule: str,
        reasons: Sequence[Any],
        classifier: str,
    ) -> int:
        return self._scalar(
            "log_safety_decision",
            subject_kind,
            subject_key,
            dimension_slug,
            verdict,
            rule,
            _json(list(reasons)),
            classifier,
            self._token(),
        )

    # -- phases: a stage's work and its recovery point in one transaction (0005) -----------
    def record_trends(self, dimension_slug: str, items: Sequence[JsonObject]) -> list[int]:
        """Stores the day's trends ({"key", "payload"} each), all or none; their ids."""
        return self._scalar("record_trends", dimension_slug, _json(list(items)), self._token())

    def decide_topic(self, idempotency_key: str, payload: JsonObject, decision: JsonObject) -> int:
        """Creates the topic once and, while a candidate, logs the safety decision ({"verdict",
        "rule", "reasons", "classifier"}) and approves or rejects it, together."""
        return self._scalar(
            "decide_topic", idempotency_key, _json(payload), _json(decision), self._token()
        )

    def record_script(self, idempotency_key: str, payload: JsonObject, decision: JsonObject) -> int:
        """Creates the script once and, while drafted, logs its safety decision, approves or
        rejects it and marks its topic scripted, together."""
        return self._scalar(
            "record_script", idempotency_key, _json(payload), _json(decision), self._token()
        )

    def plan_scenes(
        self,
        script_id: int,
        scenes: Sequence[JsonObject],
        job_type: str,
        max_attempts: int,
        partition_key: str,
    ) -> int:
        """The script's scenes ({"key", "payload", "cached", "job"} each): cached ones ready,
        the rest queued with their jobs, and the script planned, together. Jobs enqueued."""
        return self._scalar(
            "plan_scenes",
            script_id,
            _json(list(scenes)),
            job_type,
            max_attempts,
            partition_key,
            self._token(),
        )

    def complete_scene_job(
        self, job: Job, uri: str, content_sha256: str, cache_hit: bool, ttl_seconds: int
    ) -> CacheEntry:
        """Cache entry, scene ready and job succeeded, together, under the job's lease."""
        rows = self.call(
            "complete_scene_job",
            job.id,
            job.worker_id,
            job.attempt,
            uri,
            content_sha256,
            cache_hit,
            ttl_seconds,
        )
        return CacheEntry(rows[0][0], rows[0][1], job.lease_expires_at)

    def finish_visuals(self, script_id: int) -> str:
        """visuals_ready, failed (a scene's job died) or still planned; the script's state."""
        return self._scalar("finish_visuals", script_id, self._token())

    def record_voice(self, script_id: int, idempotency_key: str, payload: JsonObject) -> int:
        return self._scalar(
            "record_voice", script_id, idempotency_key, _json(payload), self._token()
        )

    def record_render(
        self, script_id: int, idempotency_key: str, payload: JsonObject, check_name: str
    ) -> str:
        """The render, its review and verdict, and the script rendered or failed, together."""
        return self._scalar(
            "record_render", script_id, idempotency_key, _json(payload), check_name, self._token()
        )

    def begin_upload(
        self,
        idempotency_key: str,
        payload: JsonObject,
        units: int,
        provider: str,
        required_reviews: Sequence[str],
        grace_seconds: int,
    ) -> UploadStart:
        """The recovery point before an upload (see UploadStart)."""
        rows = self.call(
            "begin_upload",
            idempotency_key,
            _json(payload),
            units,
            provider,
            list(required_reviews),
            grace_seconds,
            self._token(),
        )
        return UploadStart(*rows[0])

    def finish_upload(
        self,
        attempt_id: int,
        status: str,
        video_id: str | None = None,
        detail: JsonObject | None = None,
    ) -> str:
        """This holder's upload outcome: succeeded, failed or unknown; the publication's state."""
        return self._scalar(
            "finish_upload", attempt_id, status, video_id, _obj(detail), self._token()
        )

    def reconcile_upload(
        self, publication_id: int, video_id: str | None, asked_at: datetime
    ) -> str:
        """Settles an unsettled upload from the channel's answer asked at `asked_at`."""
        return self._scalar("reconcile_upload", publication_id, video_id, asked_at, self._token())

    def requeue_scenes(
        self,
        script_id: int,
        scenes: Sequence[JsonObject],
        reason: str,
        job_type: str,
        max_attempts: int,
        partition_key: str,
    ) -> int:
        """Ready scenes whose clip vanished or rotted ({"scene_id", "job"} each) go back to the
        queue with a fresh job and the script back to planned, together. Jobs enqueued."""
        return self._scalar(
            "requeue_scenes",
            script_id,
            _json(list(scenes)),
            reason,
            job_type,
            max_attempts,
            partition_key,
            self._token(),
        )

    def requeue_voice(self, script_id: int, voice_track_id: int, reason: str) -> str:
        """The script's voice track, whose file is damaged, fails and the script goes back to
        visuals_ready (or stays voice_queued), together. The script's state."""
        return self._scalar("requeue_voice", script_id, voice_track_id, reason, self._token())

    def requeue_render(self, script_id: int, render_id: int, reason: str) -> str:
        """The script's render, whose file is damaged, fails and the script goes back to voiced,
        together; refused (MD003) once a publication names the render. The script's state."""
        return self._scalar("requeue_render", script_id, render_id, reason, self._token())

    def fail_script(self, script_id: int, from_state: str, reason: str) -> bool:
        """Fails a script, its pending publications and their quota; False if a video may be
        out or in flight (reconcile first)."""
        return self._scalar("fail_script", script_id, from_state, reason, self._token())

    def retire_publication(self, publication_id: int, reason: str) -> str:
        """Ends a pending publication of an inactive account ('failed', its quota released);
        one with an upload in flight is refused (settle it with the channel first)."""
        return self._scalar("retire_publication", publication_id, reason, self._token())

    # -- YouTube publishing (0012, issue 9) ------------------------------------------------
    def begin_bucket_upload(
        self,
        idempotency_key: str,
        payload: JsonObject,
        bucket: str,
        units: int,
        provider: str,
        required_reviews: Sequence[str],
        grace_seconds: int,
    ) -> UploadStart:
        """begin_upload charged to a quota bucket ('insert', 'search', 'units'); also answers
        'skipped' for an account that is paused or needs re-authorisation."""
        rows = self.call(
            "begin_bucket_upload",
            idempotency_key,
            _json(payload),
            bucket,
            units,
            provider,
            list(required_reviews),
            grace_seconds,
            self._token(),
        )
        return UploadStart(*rows[0])

    def open_upload_session(
        self, attempt_id: int, session_uri: str, content_sha256: str, size_bytes: int
    ) -> int:
        """Commits the resumable session of this holder's attempt before any byte is sent."""
        return self._scalar(
            "open_upload_session",
            attempt_id,
            session_uri,
            content_sha256,
            size_bytes,
            self._token(),
        )

    def upload_lease(self, attempt_id: int) -> tuple[datetime, datetime]:
        """(the database's clock, when this holder's lease on its attempt ends): its requests
        to the channel end before that (0027)."""
        [(now, lease)] = self.call("upload_lease", attempt_id, self._token())
        return now, lease

    def record_upload_initiation(
        self, attempt_id: int, counted: bool = True, reason: str | None = None
    ) -> bool:
        """The attempt's initiating request is about to be sent (counted), or proved not counted
        by the channel (counted=False, with the reason)."""
        return self._scalar("record_upload_initiation", attempt_id, counted, reason, self._token())

    def record_session_gone(
        self, attempt_id: int, asked_at: datetime, recheck_s: float
    ) -> tuple[datetime, datetime]:
        """The attempt's session answered gone to a request asked at `asked_at`: (when it was
        first found gone, from when a search may settle it as not published)."""
        [(seen, settle_after)] = self.call(
            "record_session_gone", attempt_id, asked_at, recheck_s, self._token()
        )
        return seen, settle_after

    def resume_upload(self, publication_id: int) -> UploadSession:
        """Takes over the publication's unsettled upload (LeaseLost while its submitter's lease
        runs); its committed session, if any."""
        rows = self.call("resume_upload", publication_id, self._token())
        return UploadSession(*rows[0])

    def record_video_processing(
        self, publication_id: int, status: str, detail: JsonObject | None = None
    ) -> str:
        return self._scalar(
            "record_video_processing", publication_id, status, _obj(detail), self._token()
        )

    # -- issue 11, slice "probe": reviews bound to file, request and acceptance (0014) ------
    def record_bound_review(
        self,
        render_id: int,
        content_sha256: str,
        check_name: str,
        verdict: str,
        detail: JsonObject | None,
        request_sha256: str,
        acceptance: JsonObject,
    ) -> int:
        return self._scalar(
            "record_bound_review",
            render_id,
            content_sha256,
            check_name,
            verdict,
            _obj(detail),
            request_sha256,
            _json(acceptance),
            self._token(),
        )

    def record_reviewed_render(
        self,
        script_id: int,
        idempotency_key: str,
        payload: JsonObject,
        reviews: Sequence[JsonObject],
    ) -> str:
        """The render, each review ({"check_name", "problems", "acceptance"}) bound to
        payload sha256 and request_sha256, and the script rendered or failed, together."""
        return self._scalar(
            "record_reviewed_render",
            script_id,
            idempotency_key,
            _json(payload),
            _json(list(reviews)),
            self._token(),
        )

    def record_thumbnail(
        self, publication_id: int, status: str, detail: JsonObject | None = None
    ) -> str:
        """set | refused | failed, once per publication; the status that stands."""
        return self._scalar("record_thumbnail", publication_id, status, _obj(detail), self._token())

    def reviews_of(self, render_id: int) -> list[dict[str, Any]]:
        """Every review of a render, oldest first."""
        rows = self._select(
            """SELECT id, content_sha256, check_name, verdict, detail, request_sha256, acceptance
                 FROM mdame.reviews WHERE render_id = %s ORDER BY id""",
            [render_id],
        )
        names = ("id", "content_sha256", "check_name", "verdict", "detail", "request_sha256")
        return [dict(zip((*names, "acceptance"), row, strict=True)) for row in rows]

    def pause_account(self, account_id: int, reason: str) -> datetime:
        """quotaExceeded: until the next quota day; uploadLimitExceeded: 24 h. The end."""
        return self._scalar("pause_account", account_id, reason, self._token())

    def mark_needs_reauth(self, account_id: int, reason: str) -> bool:
        return self._scalar("mark_needs_reauth", account_id, reason, self._token())

    def open_quota_keys(self, prefix: str) -> list[str]:
        """The keys of quota reservations still open ('reserved') that start with `prefix`."""
        rows = self._select(
            """SELECT quota_key FROM mdame.quota_ledger
                WHERE state = 'reserved' AND starts_with(quota_key, %s) ORDER BY id""",
            [prefix],
        )
        return [key for (key,) in rows]

    def reserve_bucket_quota(
        self, account_id: int, bucket: str, units: int, quota_key: str
    ) -> int | None:
        """On a fenced view, the pipeline's version: fenced by the account's dimension."""
        return self._scalar(
            "reserve_bucket_quota", account_id, bucket, units, quota_key, *self._fenced_tail()
        )

    def store_account_credential(
        self, account_id: int, key_id: str, wrapped_key: bytes, ciphertext: bytes
    ) -> int:
        return self._scalar("store_account_credential", account_id, key_id, wrapped_key, ciphertext)

    def rewrap_account_credentials(
        self, old_key_id: str, new_key_id: str, items: Sequence[JsonObject]
    ) -> list[tuple[int, str]]:
        """One pass of a rotation (items: account_id, key_id and expected_wrapped_key as read,
        wrapped_key re-wrapped; base64). Returns (account_id, key_id) of the grants still not
        under the new key: changed since they were read, or not listed. StateConflict: the
        current master key is neither old_key_id nor, after this rotation's first pass,
        new_key_id."""
        rows = self.call("rewrap_account_credentials", old_key_id, new_key_id, Jsonb(list(items)))
        return [(account_id, key_id) for account_id, key_id in rows]

    def master_key_state(self) -> MasterKeyState:
        rows = self._select(
            """SELECT current_key_id, previous_key_id, rotated_at, now() FROM mdame.master_keys"""
        )
        if not rows:
            raise NotFound("master_key_state", "mdame.master_keys has no row: migrate")
        return MasterKeyState(*rows[0])

    def account_grant(self, account_id: int) -> StoredCredential | None:
        """The account's stored grant with the master key record, read together."""
        rows = self._select(
            """SELECT c.key_id, c.wrapped_key, c.ciphertext, c.previous_key_id,
                      c.previous_wrapped_key, k.current_key_id, k.previous_key_id, k.rotated_at,
                      now()
                 FROM mdame.account_credentials c CROSS JOIN mdame.master_keys k
                WHERE c.account_id = %s""",
            [account_id],
        )
        if not rows:
            return None
        r = rows[0]
        previous = None if r[4] is None else bytes(r[4])
        keys = MasterKeyState(r[5], r[6], r[7], r[8])
        return StoredCredential(r[0], bytes(r[1]), bytes(r[2]), r[3], previous, keys)

    def account_credential(self, account_id: int) -> tuple[str, bytes, bytes] | None:
        """(key_id, wrapped_key, ciphertext) of the account's stored grant: ciphertext only."""
        rows = self._select(
            """SELECT key_id, wrapped_key, ciphertext FROM mdame.account_credentials
                WHERE account_id = %s""",
            [account_id],
        )
        return (rows[0][0], bytes(rows[0][1]), bytes(rows[0][2])) if rows else None

    def stored_credentials(self) -> list[tuple[Account, str, bytes, bytes]]:
        """Every stored grant with its account: (account, key_id, wrapped_key, ciphertext)."""
        rows = self._select(
            """SELECT a.id, a.dimension_id, a.platform, a.handle, a.daily_quota_units, a.active,
                      a.quota_timezone, c.key_id, c.wrapped_key, c.ciphertext
                 FROM mdame.account_credentials c
                 JOIN mdame.dimension_accounts a ON a.id = c.account_id ORDER BY a.id"""
        )
        return [(Account(*r[:7]), r[7], bytes(r[8]), bytes(r[9])) for r in rows]

    def account_status(self, account_id: int) -> AccountStatus:
        rows = self._select(
            """SELECT a.needs_reauth, a.paused_until, a.pause_reason,
                      EXISTS (SELECT FROM mdame.account_credentials c WHERE c.account_id = a.id)
                 FROM mdame.dimension_accounts a WHERE a.id = %s""",
            [account_id],
        )
        if not rows:
            raise NotFound("account_status", f"account {account_id} does not exist")
        return AccountStatus(*rows[0])

    def bucket_usage(self, account_id: int, day: date | None = None) -> dict[str, tuple[int, int]]:
        """bucket -> (reserved, committed) of one quota day (None: the account's current one)."""
        rows = self._select(
            """SELECT u.bucket, u.reserved_units, u.committed_units
                 FROM mdame.quota_bucket_usage u JOIN mdame.dimension_accounts a
                   ON a.id = u.account_id
                WHERE u.account_id = %s
                  AND u.day = coalesce(%s, (now() AT TIME ZONE a.quota_timezone)::date)""",
            [account_id, day],
        )
        return {r[0]: (int(r[1]), int(r[2])) for r in rows}

    def has_upload_session(self, attempt_id: int) -> bool:
        """Whether the attempt got a session (bytes may be out). The session URI itself is a
        bearer: only resume_upload returns it, to the publication's lock holder."""
        rows = self._select(
            "SELECT 1 FROM mdame.upload_sessions WHERE attempt_id = %s", [attempt_id]
        )
        return bool(rows)

    # -- voice HALT and its backoff retry (0009, 0022) -------------------------------------
    def halt_voice(
        self,
        script_id: int,
        reason: str,
        *,
        permanent: bool,
        backoff_s: float,
        backoff_max_s: float,
        retry_until: datetime,
    ) -> datetime | None:
        """voice_queued -> halted with the reason and a 'voice_halted' event, together; the
        time its voice may be retried (backoff_s * 2^(halts-1), capped at backoff_max_s and at
        retry_until), or None when the script is failed instead: a permanent cause, or the
        retry window already closed."""
        return self._scalar(
            "halt_voice",
            script_id,
            reason,
            permanent,
            backoff_s,
            backoff_max_s,
            retry_until,
            self._token(),
        )

    def retry_halted_voice(self, script_id: int) -> str:
        """halted -> voice_queued once the backoff has expired (RetryNotDue before); 'failed'
        when the retry window closed meanwhile."""
        return self._scalar("retry_halted_voice", script_id, self._token())

    _VOICE_HALT_COLUMNS = """h.script_id, h.halts, h.max_halts, h.last_reason, h.halted_at,
                             h.next_retry_at, h.permanent, h.retry_until"""

    def get_voice_halt(self, script_id: int) -> VoiceHalt | None:
        rows = self._select(
            f"""SELECT {self._VOICE_HALT_COLUMNS}
                  FROM mdame.voice_halts h WHERE h.script_id = %s""",
            [script_id],
        )
        return VoiceHalt(*rows[0]) if rows else None

    def voice_retries_due(self, dimension_id: int, day: date) -> list[VoiceHalt]:
        """The partition's halted scripts whose voice backoff has expired (database clock)."""
        rows = self._select(
            f"""SELECT {self._VOICE_HALT_COLUMNS}
                  FROM mdame.voice_halts h JOIN mdame.scripts s ON s.id = h.script_id
                 WHERE s.dimension_id = %s AND s.partition_date = %s AND s.state = 'halted'
                   AND h.next_retry_at <= now()
                 ORDER BY h.script_id""",
            [dimension_id, day],
        )
        return [VoiceHalt(*row) for row in rows]

    def partitions_with_voice_retry_due(self) -> list[PartitionWork]:
        """Partitions with a halted script whose voice backoff has expired; last_update is
        the newest expiry, so each retry is a new request for the hop sensor."""
        rows = self._select(
            """SELECT s.partition_date, d.slug, max(h.next_retry_at), count(*)
                 FROM mdame.voice_halts h JOIN mdame.scripts s ON s.id = h.script_id
                 JOIN mdame.dimensions d ON d.id = s.dimension_id
                WHERE s.state = 'halted' AND h.next_retry_at <= now() AND d.active
                GROUP BY s.partition_date, d.slug ORDER BY s.partition_date, d.slug"""
        )
        return [PartitionWork(*row) for row in rows]

    # -- reads (SELECT only) -------------------------------------------------------------
    def db_now(self) -> datetime:
        """The database's clock (leases and reconcile answers are judged by it)."""
        return self._select("SELECT now()")[0][0]

    def environment(self) -> str:
        return self._select("SELECT env FROM mdame.environment")[0][0]

    def get_work_unit(self, kind: str, key_or_id: int | str) -> WorkUnit | None:
        """By id (int) or idempotency key (str)."""
        column = "id" if isinstance(key_or_id, int) else "idempotency_key"
        units = self._work_units(kind, f"{column} = %s", [key_or_id], limit=1)
        return units[0] if units else None

    def list_work_units(self, kind: str, *, limit: int = 1000, **filters: Any) -> list[WorkUnit]:
        """Units of a kind filtered by equality on state or natural columns, oldest first."""
        table, refs = self._kind(kind)
        allowed = {"state", "idempotency_key", *refs}
        unknown = set(filters) - allowed
        if unknown:
            raise ValueError(f"cannot filter {kind} by {sorted(unknown)}; use {sorted(allowed)}")
        where = " AND ".join(f'"{name}" = %s' for name in filters) or "true"
        return self._work_units(kind, where, list(filters.values()), limit=limit)

    def _work_units(self, kind: str, where: str, args: list[Any], *, limit: int) -> list[WorkUnit]:
        table, refs = self._kind(kind)
        columns = ", ".join(f'"{c}"' for c in (*_SHARED_COLUMNS[:1], *_SHARED_COLUMNS[2:], *refs))
        rows = self._select(
            f'SELECT {columns} FROM mdame."{table}" WHERE {where} ORDER BY id LIMIT %s',
            [*args, limit],
        )
        units = []
        for row in rows:
            unit_id, key, state, payload, result, attempts, created_at, updated_at = row[:8]
            natural = dict(zip(refs, row[8:], strict=True))
            units.append(
                WorkUnit(
                    kind,
                    unit_id,
                    key,
                    state,
                    payload,
                    result,
                    attempts,
                    created_at,
                    updated_at,
                    natural,
                )  # fmt: skip
            )
        return units

    def _kind(self, kind: str) -> tuple[str, tuple[str, ...]]:
        """(table, natural columns) of a kind, read once from mdame.work_kinds and the catalog."""
        if kind not in self._kinds:
            rows = self._select(
                """SELECT k.table_name, array_agg(a.attname::text ORDER BY a.attnum)
                     FROM mdame.work_kinds k
                     JOIN pg_attribute a ON a.attrelid = format('mdame.%%I', k.table_name)::regclass
                    WHERE k.kind = %s AND a.attnum > 0 AND NOT a.attisdropped
                      AND a.attname::text <> ALL (%s)
                    GROUP BY k.table_name""",
                [kind, list(_SHARED_COLUMNS)],
            )
            if not rows:
                raise ValueError(f"unknown kind {kind!r}")
            self._kinds[kind] = (rows[0][0], tuple(rows[0][1]))
        return self._kinds[kind]

    def list_events(self, subject_kind: str, subject_id: int) -> list[Event]:
        rows = self._select(
            """SELECT id, subject_kind, subject_id, event, from_state, to_state, detail, created_at
                 FROM mdame.events WHERE subject_kind = %s AND subject_id = %s ORDER BY id""",
            [subject_kind, subject_id],
        )
        return [Event(*row) for row in rows]

    def get_job(self, job_id: int) -> JobRecord | None:
        rows = self._select(
            """SELECT id, job_type, idempotency_key, state, payload, result, attempt,
                      max_attempts, lease_owner, lease_expires_at, last_error
                 FROM mdame.jobs WHERE id = %s""",
            [job_id],
        )
        return JobRecord(*rows[0]) if rows else None

    def count_jobs(self, job_type: str | None = None) -> dict[str, int]:
        """Jobs per state (of one type, or all)."""
        rows = self._select(
            """SELECT state, count(*) FROM mdame.jobs
                WHERE %(t)s::text IS NULL OR job_type = %(t)s GROUP BY state""",
            {"t": job_type},
        )
        return {state: n for state, n in rows}

    def list_attempts(self, work_key: str) -> list[Attempt]:
        rows = self._select(
            """SELECT id, work_key, attempt_no, provider, request_hash, status, detail
                 FROM mdame.provider_attempts WHERE work_key = %s ORDER BY attempt_no""",
            [work_key],
        )
        return [Attempt(*row) for row in rows]

    def budget_usage(self, scope: str, period: str) -> BudgetUsage | None:
        rows = self._select(
            """SELECT scope, period, cap_micros, reserved_micros, settled_micros
                 FROM mdame.budget_usage WHERE scope = %s AND period = %s""",
            [scope, period],
        )
        return BudgetUsage(*rows[0]) if rows else None

    def quota_usage(self, account_id: int, day: date | None = None) -> QuotaUsage:
        """Usage of one quota day; None: the account's current quota day (its time zone)."""
        rows = self._select(
            """WITH a AS (
                 SELECT id, daily_quota_units,
                        coalesce(%(day)s::date,
                                 (now() AT TIME ZONE quota_timezone)::date) AS day
                   FROM mdame.dimension_accounts WHERE id = %(id)s)
               SELECT a.id, a.day, a.daily_quota_units,
                      coalesce(u.reserved_units, 0), coalesce(u.committed_units, 0)
                 FROM a LEFT JOIN mdame.quota_usage u ON u.account_id = a.id AND u.day = a.day""",
            {"day": day, "id": account_id},
        )
        if not rows:
            raise ValueError(f"account {account_id} does not exist")
        return QuotaUsage(*rows[0])

    def list_dimensions(self, *, active_only: bool = False) -> list[Dimension]:
        rows = self._select(
            """SELECT id, slug, title, config, active FROM mdame.dimensions
                WHERE active OR NOT %s ORDER BY slug""",
            [active_only],
        )
        return [Dimension(*row) for row in rows]

    def get_dimension(self, slug: str) -> Dimension | None:
        rows = self._select(
            "SELECT id, slug, title, config, active FROM mdame.dimensions WHERE slug = %s", [slug]
        )
        return Dimension(*rows[0]) if rows else None

    def list_accounts(self, dimension_slug: str, *, active_only: bool = False) -> list[Account]:
        rows = self._select(
            """SELECT a.id, a.dimension_id, a.platform, a.handle, a.daily_quota_units, a.active,
                      a.quota_timezone
                 FROM mdame.dimension_accounts a JOIN mdame.dimensions d ON d.id = a.dimension_id
                WHERE d.slug = %s AND (a.active OR NOT %s) ORDER BY a.id""",
            [dimension_slug, active_only],
        )
        return [Account(*row) for row in rows]

    def covered_topic_titles(self, dimension_id: int, day: date, lookback_days: int) -> list[str]:
        """Titles of the dimension's approved or scripted topics on the other days within
        `lookback_days` of `day`, on either side: backfills run days out of order, so a later
        day that already covered a story counts as much as an earlier one."""
        rows = self._select(
            """SELECT payload->>'title' FROM mdame.topics
                WHERE dimension_id = %(dim)s AND state IN ('approved', 'scripted')
                  AND partition_date <> %(day)s::date
                  AND partition_date BETWEEN %(day)s::date - %(n)s AND %(day)s::date + %(n)s
                  AND payload ? 'title'
                ORDER BY partition_date, id""",
            {"dim": dimension_id, "day": day, "n": lookback_days},
        )
        return [r[0] for r in rows]

    def get_lock(self, lock_name: str) -> LockInfo | None:
        rows = self._select(
            """SELECT lock_name, holder, token, expires_at, released_at IS NOT NULL
                 FROM mdame.system_locks WHERE lock_name = %s""",
            [lock_name],
        )
        return LockInfo(*rows[0]) if rows else None

    # -- reads for the orchestration layer (sensors, checks) ------------------------------
    def partitions_with_scripts_in(self, states: Sequence[str]) -> list[PartitionWork]:
        """(day, dimension) pairs with scripts in any of `states`, and their newest update."""
        rows = self._select(
            """SELECT s.partition_date, d.slug, max(s.updated_at), count(*)
                 FROM mdame.scripts s JOIN mdame.dimensions d ON d.id = s.dimension_id
                WHERE s.state = ANY(%s) AND d.active
                GROUP BY s.partition_date, d.slug ORDER BY s.partition_date, d.slug""",
            [list(states)],
        )
        return [PartitionWork(*row) for row in rows]

    def job_states(self, idempotency_keys: Sequence[str]) -> dict[str, str]:
        """State of each job by its idempotency key (keys with no job are absent)."""
        rows = self._select(
            """SELECT k.idempotency_key, j.state FROM mdame.job_keys k
                 JOIN mdame.jobs j ON j.id = k.job_id WHERE k.idempotency_key = ANY(%s)""",
            [list(idempotency_keys)],
        )
        return dict(rows)

    # -- the trend sources' conditional-GET cache (0010; shared by dimensions: not fenced) -----
    def get_feed_cache(self, source_url: str) -> FeedCacheEntry | None:
        rows = self.call("get_feed_cache", source_url)
        return FeedCacheEntry(*rows[0]) if rows else None

    def record_feed_fetch(
        self,
        source_url: str,
        etag: str | None,
        last_modified: str | None,
        items: Sequence[JsonObject] | None,
    ) -> int:
        """A full response (items) replaces the cache; items None records a 304."""
        return self._scalar(
            "record_feed_fetch",
            source_url,
            etag,
            last_modified,
            None if items is None else _json(list(items)),
        )

    def record_feed_failure(
        self, source_url: str, reason: str, execution_id: str | None = None
    ) -> int:
        """Counts a failed fetch on the source and records a `fetch_failed` event."""
        return self._scalar("record_feed_failure", source_url, reason, execution_id)

    # -- issue 12, slice "auditor": analytics and weekly reports (0016; not fenced) ----------
    def record_video_stats(self, day: date, items: Sequence[JsonObject]) -> int:
        """Upserts one day's counters, items [{"publication_id", "views", "likes",
        "comments"}] (<= 1000, each of a published publication); all or nothing. The count."""
        return self._scalar("record_video_stats", day, _json(list(items)))

    def store_report(
        self,
        dimension_slug: str,
        week_start: date,
        metrics: JsonObject,
        markdown: str,
        images: Sequence[JsonObject],
    ) -> int:
        """Stores (or replaces: revision + 1) the dimension's report of the week starting on
        `week_start` (a Monday). images: [{"name", "uri", "sha256"}]. The report id."""
        return self._scalar(
            "store_report",
            dimension_slug,
            week_start,
            _json(metrics),
            markdown,
            _json(list(images)),
        )

    def get_report(self, dimension_slug: str, week_start: date) -> Report | None:
        rows = self._select(
            """SELECT r.id, r.dimension_id, r.week_start, r.metrics, r.markdown, r.images,
                      r.revision, r.created_at, r.updated_at
                 FROM mdame.reports r JOIN mdame.dimensions d ON d.id = r.dimension_id
                WHERE d.slug = %s AND r.week_start = %s""",
            [dimension_slug, week_start],
        )
        return Report(*rows[0]) if rows else None

    def video_stats(self, dimension_id: int, first_day: date, last_day: date) -> list[VideoStat]:
        """The dimension's counters observed from first_day to last_day (inclusive)."""
        rows = self._select(
            """SELECT publication_id, day, dimension_id, video_id, views, likes, comments,
                      fetched_at
                 FROM mdame.video_stats
                WHERE dimension_id = %s AND day BETWEEN %s AND %s
                ORDER BY day, publication_id""",
            [dimension_id, first_day, last_day],
        )
        return [VideoStat(*row) for row in rows]

    def published_videos(self, dimension_id: int, last_day: date) -> list[PublishedVideo]:
        """The dimension's published videos made for partition days up to last_day."""
        rows = self._select(
            """SELECT p.id, s.dimension_id, p.account_id, a.platform, p.result ->> 'video_id',
                      coalesce((SELECT max(e.created_at) FROM mdame.events e
                                 WHERE e.subject_kind = 'publication' AND e.subject_id = p.id
                                   AND e.to_state = 'published'), p.updated_at),
                      s.partition_date,
                      coalesce(ARRAY(SELECT jsonb_array_elements_text(t.payload -> 'keywords')),
                               '{}')
                 FROM mdame.publications p
                 JOIN mdame.scripts s ON s.id = p.script_id
                 JOIN mdame.topics t ON t.id = s.topic_id
                 JOIN mdame.dimension_accounts a ON a.id = p.account_id
                WHERE s.dimension_id = %s AND p.state = 'published'
                  AND coalesce(p.result ->> 'video_id', '') <> '' AND s.partition_date <= %s
                ORDER BY p.id""",
            [dimension_id, last_day],
        )
        return [PublishedVideo(r[0], r[1], r[2], r[3], r[4], r[5], r[6], tuple(r[7])) for r in rows]

    def auditor_facts(self, dimension_id: int, first_day: date, last_day: date) -> dict[str, Any]:
        """The raw facts of one dimension's week (partition days first_day..last_day) that the
        Strategic Auditor's metrics are computed from (mdame_domain.audit), as plain values.
        Work is attributed to its partition day; spend and quota to the day they were used."""
        args = {"dim": dimension_id, "first": first_day, "last": last_day}
        week_scripts = """SELECT id FROM mdame.scripts
                           WHERE dimension_id = %(dim)s
                             AND partition_date BETWEEN %(first)s AND %(last)s"""
        facts: dict[str, Any] = {}
        facts["scripts"] = [
            {"id": r[0], "state": r[1], "hook_score": r[2]}
            for r in self._select(
                f"""SELECT id, state, (payload -> 'script' ->> 'hook_score')::float8
                      FROM mdame.scripts WHERE id IN ({week_scripts}) ORDER BY id""",
                args,
            )
        ]
        facts["transitions"] = [
            {"script_id": r[0], "from": r[1], "to": r[2], "at": r[3]}
            for r in self._select(
                f"""SELECT subject_id, from_state, to_state, created_at FROM mdame.events
                     WHERE subject_kind = 'script' AND to_state IS NOT NULL
                       AND subject_id IN ({week_scripts}) ORDER BY id""",
                args,
            )
        ]
        facts["topics"] = [
            {"state": r[0], "rejected_by": r[1]}
            for r in self._select(
                """SELECT state, result ->> 'rejected_by' FROM mdame.topics
                    WHERE dimension_id = %(dim)s
                      AND partition_date BETWEEN %(first)s AND %(last)s""",
                args,
            )
        ]
        facts["trends"] = self._select(
            """SELECT count(*) FROM mdame.trends WHERE dimension_id = %(dim)s
                 AND partition_date BETWEEN %(first)s AND %(last)s""",
            args,
        )[0][0]
        facts["safety"] = [
            {"verdict": r[0], "rule": r[1], "subject_kind": r[2]}
            for r in self._select(
                """SELECT verdict, rule, subject_kind FROM mdame.safety_audit_logs
                    WHERE dimension_id = %(dim)s AND verdict <> 'allow'
                      AND created_at >= %(first)s::date
                      AND created_at < %(last)s::date + 1""",
                args,
            )
        ]
        spent = self._select(
            """SELECT coalesce(sum(CASE state WHEN 'settled' THEN actual_micros
                                             WHEN 'reserved' THEN reserved_micros END), 0)
                 FROM mdame.budget_ledger l
                 JOIN mdame.dimensions d ON l.scope = 'dimension:' || d.slug
                WHERE d.id = %(dim)s AND l.period BETWEEN %(first)s::text AND %(last)s::text""",
            args,
        )
        facts["spent_micros"] = int(spent[0][0])
        facts["quota"] = {
            r[0]: int(r[1])
            for r in self._select(
                """SELECT l.bucket, sum(l.units) FROM mdame.quota_ledger l
                     JOIN mdame.dimension_accounts a ON a.id = l.account_id
                    WHERE a.dimension_id = %(dim)s AND l.state = 'committed'
                      AND l.day BETWEEN %(first)s AND %(last)s GROUP BY l.bucket""",
                args,
            )
        }
        facts["scenes"] = [
            {"state": r[0], "cached": r[1]}
            for r in self._select(
                f"""SELECT state, coalesce((result ->> 'cached')::boolean, false)
                      FROM mdame.scenes WHERE script_id IN ({week_scripts})""",
                args,
            )
        ]
        gpu = self._select(
            f"""SELECT coalesce(sum(extract(epoch FROM j.finished_at - j.started_at)), 0)
                  FROM mdame.jobs j JOIN mdame.scenes s ON s.id = (j.payload ->> 'scene_id')::bigint
                 WHERE s.script_id IN ({week_scripts}) AND j.state = 'succeeded'
                   AND j.started_at IS NOT NULL
                   AND NOT coalesce((j.result ->> 'cache_hit')::boolean, false)""",
            args,
        )
        facts["gpu_seconds"] = float(gpu[0][0])
        facts["videos"] = [
            {
                "publication_id": r[0],
                "published_on": r[1],
                "keywords": list(r[2]),
                "views": r[3],
                "likes": r[4],
            }
            for r in self._select(
                """SELECT p.id, t.partition_date,
                          coalesce(ARRAY(SELECT jsonb_array_elements_text(t.payload -> 'keywords')),
                                   '{}'),
                          last.views, last.likes
                     FROM mdame.publications p
                     JOIN mdame.scripts s ON s.id = p.script_id
                     JOIN mdame.topics t ON t.id = s.topic_id
                     LEFT JOIN LATERAL (
                          SELECT v.views, v.likes FROM mdame.video_stats v
                           WHERE v.publication_id = p.id AND v.day <= %(last)s
                           ORDER BY v.day DESC LIMIT 1) last ON true
                    WHERE s.dimension_id = %(dim)s AND p.state = 'published'
                      AND s.partition_date <= %(last)s
                    ORDER BY p.id""",
                args,
            )
        ]
        # Daily counters from a week before, so the report can draw the trend across weeks.
        facts["daily"] = [
            {"day": r[0], "publication_id": r[1], "views": int(r[2]), "likes": int(r[3])}
            for r in self._select(
                """SELECT day, publication_id, views, likes FROM mdame.video_stats
                    WHERE dimension_id = %(dim)s AND day BETWEEN %(first)s::date - 7 AND %(last)s
                    ORDER BY day, publication_id""",
                args,
            )
        ]
        return facts

    # -- operator alerts (0015; issue 12, slice "ops-alerts"; not fenced: see the migration) ---
    def record_alert(
        self, dimension: str | None, cause: str, day: date, text: str, lease_s: int = 120
    ) -> AlertRecord:
        """Counts one occurrence of `cause` for the dimension (None: global) on UTC `day`."""
        rows = self.call("record_alert", dimension or "", cause, day, text, lease_s)
        return AlertRecord(*rows[0])

    # The claim's token settles it: a holder whose claim was taken over gets LeaseLost (MD004)
    # and changes nothing, so it never clears the new holder's claim.
    def mark_alert_delivered(self, alert_id: int, claim_token: UUID) -> bool:
        """True the first time; False when the alert was delivered already."""
        return bool(self._scalar("mark_alert_delivered", alert_id, claim_token))

    def mark_alert_failed(self, alert_id: int, error: str, claim_token: UUID) -> int:
        """Releases the claim for the sweep to retry; returns the attempts so far."""
        return int(self._scalar("mark_alert_failed", alert_id, error, claim_token))

    def renew_alert_claim(self, alert_id: int, claim_token: UUID, lease_s: int = 120) -> datetime:
        """Extends the claim from now (the database's clock); LeaseLost when it is no longer
        this token's, StateConflict once the alert was delivered."""
        return self._scalar("renew_alert_claim", alert_id, claim_token, lease_s)

    def claim_undelivered_alerts(
        self, limit: int = 20, lease_s: int = 120, max_age_days: int = 7
    ) -> list[PendingAlert]:
        rows = self.call("claim_undelivered_alerts", limit, lease_s, max_age_days)
        return [
            PendingAlert(alert_id, slug or None, cause, day, text, attempts, token)
            for alert_id, slug, cause, day, text, attempts, token in rows
        ]

    def last_safety_verdict(self, subject_kind: str, subject_key: str) -> str | None:
        rows = self._select(
            """SELECT verdict FROM mdame.safety_audit_logs
                WHERE subject_kind = %s AND subject_key = %s ORDER BY id DESC LIMIT 1""",
            [subject_kind, subject_key],
        )
        return rows[0][0] if rows else None

    # -- versioned parameter sets (0017, issue 12 slice "adaptive") ----------------------------
    def apply_param_set(
        self,
        dimension_slug: str,
        week_start: date,
        effective_from: date,
        params: JsonObject,
        limits: JsonObject,
        changes: Sequence[JsonObject],
        explanation: str,
    ) -> tuple[int, bool]:
        """(version, created): a new version for the week, or the week's existing one when the
        same params are proposed again. InvalidInput for a value outside `limits`, a move over
        the weekly step or an unknown parameter; StateConflict for a second change in a week."""
        rows = self.call(
            "apply_param_set",
            dimension_slug,
            week_start,
            effective_from,
            _json(params),
            _json(limits),
            _json(list(changes)),
            explanation,
        )
        return int(rows[0][0]), bool(rows[0][1])

    def rollback_param_set(self, dimension_slug: str, reason: str) -> tuple[int, int]:
        """(rolled-back version, version now current; 0: the YAML's values). NotFound when the
        dimension is unknown or has no set left to roll back."""
        rows = self.call("rollback_param_set", dimension_slug, reason)
        return int(rows[0][0]), int(rows[0][1])

    _PARAM_COLUMNS = """d.slug, s.version, s.parent_version, s.week_start, s.effective_from,
        s.params, s.limits, s.changes, s.explanation, s.created_at, s.rolled_back_at,
        s.rollback_reason
        FROM mdame.param_sets s JOIN mdame.dimensions d ON d.id = s.dimension_id"""

    def param_sets(self, dimension_slug: str) -> list[ParamSet]:
        """Every version of the dimension's parameter set, oldest first (rolled back too)."""
        rows = self._select(
            f"SELECT {self._PARAM_COLUMNS} WHERE d.slug = %s ORDER BY s.version", [dimension_slug]
        )
        return [ParamSet(*row) for row in rows]

    def current_param_set(self, dimension_slug: str, day: date | None = None) -> ParamSet | None:
        """The set in force: the highest version not rolled back (None: the YAML's values).
        With `day`, the one a run of that day reads (effective_from <= day), so a day's re-runs
        read the same set."""
        rows = self._select(
            f"""SELECT {self._PARAM_COLUMNS}
                 WHERE d.slug = %s AND s.rolled_back_at IS NULL
                   AND (%s::date IS NULL OR s.effective_from <= %s::date)
                 ORDER BY s.version DESC LIMIT 1""",
            [dimension_slug, day, day],
        )
        return ParamSet(*rows[0]) if rows else None


def _uuid(value: UUID | str | None) -> UUID | None:
    return value if value is None or isinstance(value, UUID) else UUID(str(value))


def _check_idle(conn: psycopg.Connection) -> None:
    """The pool's check on checkout: raises for a connection that died while idle (server
    restart, idle timeout, pg_terminate_backend), so the pool hands out another and no RPC is
    ever sent on it. An idle session's socket is silent until the server ends it (it then sends
    a FATAL message, or EOF), so a zero-timeout poll costs no round trip; only a readable socket
    is looked at more closely."""
    if conn.closed or conn.broken:
        raise psycopg.OperationalError("the pooled connection is closed")
    readable, _, _ = select.select([conn.pgconn.socket], [], [], 0)
    if readable:
        conn.execute("")  # consumes a harmless notice; raises if the server closed the session


def _nul_path(value: Any, path: str) -> str | None:
    """Where a NUL character is inside a text, text array or JSON value (None: nowhere)."""
    if isinstance(value, str):
        return path if "\x00" in value else None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and "\x00" in key:
                return f"{path} (a key)"
            found = _nul_path(item, f"{path}.{key}")
            if found is not None:
                return found
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            found = _nul_path(item, f"{path}[{i}]")
            if found is not None:
                return found
    return None


def _mapped(rpc: str, exc: psycopg.Error) -> StateError | None:
    """The server refused the call -> StateError; None for a lost connection (re-raise it)."""
    if isinstance(exc, psycopg.OperationalError) or exc.sqlstate is None:
        return None
    message = _clipped(exc.diag.message_primary or str(exc))
    return _ERRORS.get(exc.sqlstate, StateError)(rpc, message, exc.sqlstate)


MAX_ERROR_CHARS = 1000


def _clipped(message: str) -> str:
    """Server messages can quote the offending input (a constraint's failing value): keep what
    reaches logs, events and run metadata bounded whatever the input was."""
    if len(message) <= MAX_ERROR_CHARS:
        return message
    return f"{message[:MAX_ERROR_CHARS]}... ({len(message)} characters)"
