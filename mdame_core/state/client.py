"""The client machinery every subject's RPC methods build on: the connection pool and the
check of each connection, the one choke point `call` (with the NUL check and the error mapping),
the read helpers, and the commit observer. See the package's docstring for what a call does.
"""

from __future__ import annotations

import copy
import re
import select
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Self

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
from mdame_core.state.errors import EnvironmentMismatch, InvalidInput, _mapped
from mdame_core.state.fence import Fence
from mdame_domain.timing import spent

JsonObject = Mapping[str, Any]

_RPC_NAME = re.compile(r"^[a-z][a-z0-9_]{0,62}$")

# The commit observer: the injection point of fault-injection tests.
CommitObserver = Callable[[str, str], None]
_commit_observer: CommitObserver | None = None


def set_commit_observer(observer: CommitObserver | None) -> None:
    """Process-wide: `observer(rpc, "before")` runs just before an RPC statement is sent,
    `observer(rpc, "after")` once its result has come back (the call committed; a refused call
    gets no "after"). None removes it. For tests only (the crash harness installs a crash point
    with it); production code never sets it."""
    global _commit_observer
    _commit_observer = observer


def _json(value: Any) -> Jsonb | None:
    """Wrap for a jsonb parameter; None stays NULL (the RPC then refuses it)."""
    return None if value is None else Jsonb(value)


def _obj(value: JsonObject | None) -> Jsonb:
    """An optional detail/result object: absent means {}."""
    return Jsonb(dict(value) if value is not None else {})


class ClientBase:
    """The pool-backed client without its RPC methods. Every subject's mixin derives from it, so
    each mixin's `self` has `call`, `_scalar`, `_select`, `_token` and `_fenced_tail`; StateStore
    combines the mixins."""

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
        self._flows: dict[tuple[str, str], tuple[str, ...]] = {}
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

    def fenced(self, fence: Fence) -> Self:
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
        """The public token of the lock this view writes under, to name it (RuntimeError on an
        unfenced client). Fenced calls carry the lock's secret instead."""
        return self._held().token

    def _held(self) -> Fence:
        if self._fence is None:
            raise RuntimeError(
                "this call changes a partition's work and needs the pipeline lock: "
                "make it on state.fenced(fence)"
            )
        return self._fence

    def _token(self) -> int:
        """What a fenced RPC's lock token argument carries: the holder's secret."""
        return self._held().secret

    def _fenced_tail(self) -> tuple[int, ...]:
        """The lock's secret as the last argument on the app's fenced view; nothing on an
        unfenced or admin client (the unfenced RPC versions are the admin role's)."""
        return () if self._fence is None or self.role == "admin" else (self._fence.secret,)

    def __enter__(self) -> Self:
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
        with spent("database"), self._pool.connection() as conn:
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
        with spent("database"), self._pool.connection() as conn:
            return conn.execute(query, args).fetchall()


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
