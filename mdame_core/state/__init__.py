"""The state-store client: typed calls of the mdame.* RPCs over a psycopg connection pool.

State changes go through exactly one choke point, `StateStore.call`, which runs each RPC as one
autocommit statement (SELECT * FROM mdame.<rpc>(...)): the function body is the transaction, so a
call costs one round trip. Reads are plain SELECTs. The client refuses a database of another ENV
and acts as the application role (the operator's commands: the admin role), which can call
functions and read tables but never write them directly.

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

The package: `client` (the pool, `call`, the read helpers, the commit observer), `errors`
(StateError and its subclasses, and the mapping of a server error to them), `fence` (the
pipeline lock a writer holds), `records` (the typed results), and one mixin class per subject,
which `store.StateStore` combines: locks_runs, registry (dimensions and accounts), work_units,
jobs, scene_cache, retention, budget_quota, attempts_paid_calls, reviews_safety, phases,
publishing, credentials, voice_halt, reads, feed_cache, analytics_reports, alerts and
param_sets. Import the names from here.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

# Every name the module defined before it became this package is importable from here: the
# public ones are listed in __all__, the private helpers carry noqa: F401.
from mdame_core.state.client import (  # noqa: F401
    _RPC_NAME,
    CommitObserver,
    JsonObject,
    _check_idle,
    _json,
    _nul_path,
    _obj,
    set_commit_observer,
)
from mdame_core.state.errors import (  # noqa: F401
    _ERRORS,
    MAX_ERROR_CHARS,
    EnvironmentMismatch,
    Fenced,
    FenceLost,
    IdempotencyConflict,
    InvalidInput,
    LeaseHeld,
    LeaseLost,
    MediaCollected,
    NotFound,
    ReconcileRequired,
    RetryNotDue,
    StateConflict,
    StateError,
    _clipped,
    _mapped,
)
from mdame_core.state.fence import Fence
from mdame_core.state.locks_runs import _uuid  # noqa: F401
from mdame_core.state.records import (
    Account,
    AccountStatus,
    AlertRecord,
    Attempt,
    BudgetUsage,
    CacheEntry,
    CollectableMedia,
    CollectionStart,
    Dimension,
    Event,
    FeedCacheEntry,
    Job,
    JobRecord,
    LockGrant,
    LockInfo,
    LockSecret,
    LockToken,
    MasterKeyState,
    MediaCollectionMark,
    PaidCallStart,
    ParamSet,
    PartitionWork,
    PendingAlert,
    PublishedVideo,
    QuotaUsage,
    RearmedCall,
    Report,
    SceneClaim,
    StoredCredential,
    UploadSession,
    UploadStart,
    VideoStat,
    VoiceHalt,
    WorkUnit,
)
from mdame_core.state.store import StateStore
from mdame_core.state.work_units import _SHARED_COLUMNS  # noqa: F401

__all__ = [
    "Account",
    "AccountStatus",
    "AlertRecord",
    "Attempt",
    "BudgetUsage",
    "CacheEntry",
    "CollectableMedia",
    "CollectionStart",
    "CommitObserver",
    "Dimension",
    "EnvironmentMismatch",
    "Event",
    "FeedCacheEntry",
    "Fence",
    "FenceLost",
    "Fenced",
    "IdempotencyConflict",
    "InvalidInput",
    "Job",
    "JobRecord",
    "JsonObject",
    "LeaseHeld",
    "LeaseLost",
    "LockGrant",
    "LockInfo",
    "LockSecret",
    "LockToken",
    "MAX_ERROR_CHARS",
    "MasterKeyState",
    "MediaCollected",
    "MediaCollectionMark",
    "NotFound",
    "PaidCallStart",
    "ParamSet",
    "PartitionWork",
    "PendingAlert",
    "PublishedVideo",
    "QuotaUsage",
    "RearmedCall",
    "ReconcileRequired",
    "Report",
    "RetryNotDue",
    "SceneClaim",
    "StateConflict",
    "StateError",
    "StateStore",
    "StoredCredential",
    "UploadSession",
    "UploadStart",
    "VideoStat",
    "VoiceHalt",
    "WorkUnit",
    "set_commit_observer",
]

if not TYPE_CHECKING:

    def __getattr__(name: str) -> Any:
        """`_commit_observer` as `call` reads it now (set_commit_observer rebinds it in
        `client`, so a copy bound here would go stale)."""
        if name == "_commit_observer":
            from mdame_core.state import client

            return client._commit_observer
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
