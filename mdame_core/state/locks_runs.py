"""Pipeline locks and runs: the fencing token a partition's writer holds, and its run record."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import date, datetime
from uuid import UUID

from mdame_core.state.client import ClientBase, JsonObject, _obj
from mdame_core.state.records import LockGrant, LockInfo, LockSecret, LockToken


def _uuid(value: UUID | str | None) -> UUID | None:
    return value if value is None or isinstance(value, UUID) else UUID(str(value))


class LocksRuns(ClientBase):
    """The lock and run RPCs, and the reads of a lock and of the partitions left to run."""

    def acquire_pipeline_lock(
        self, lock_name: str, holder: str, ttl_seconds: int
    ) -> LockGrant | None:
        """The lock's fencing token (strictly increasing) and the holder's secret, or None
        while a live holder has the lock."""
        rows = self.call("acquire_pipeline_lock", lock_name, holder, ttl_seconds)
        if not rows:
            return None
        token, secret = rows[0]
        return LockGrant(LockToken(token), LockSecret(secret))

    def heartbeat_pipeline_lock(
        self, lock_name: str, holder: str, secret: int, ttl_seconds: int | None = None
    ) -> datetime:
        """Extends the lease; raises LeaseLost for a secret that no longer holds it. Returns
        the new expiry."""
        return self._scalar("heartbeat_pipeline_lock", lock_name, holder, secret, ttl_seconds)

    def release_pipeline_lock(self, lock_name: str, holder: str, secret: int) -> bool:
        """True: released now; False: already released by this holder; LeaseLost: the secret
        no longer holds it."""
        return self._scalar("release_pipeline_lock", lock_name, holder, secret)

    def release_dead_pipeline_lock(self, lock_name: str, holder: str, token: int) -> bool:
        """The operator's (admin role) release of a dead holder's lock, by its public token:
        True when released now, False when it was released, expired or taken over already."""
        return self._scalar("release_dead_pipeline_lock", lock_name, holder, token)

    def start_pipeline_run(
        self,
        execution_id: UUID | str,
        dimension_slug: str | None,
        partition_key: str,
        lock_secret: int | None,
    ) -> int:
        """The run's id; it records the public token of the lock `lock_secret` holds."""
        return self._scalar(
            "start_pipeline_run", _uuid(execution_id), dimension_slug, partition_key, lock_secret
        )

    def finish_pipeline_run(
        self, execution_id: UUID | str, status: str, detail: JsonObject | None = None
    ) -> bool:
        return self._scalar("finish_pipeline_run", _uuid(execution_id), status, _obj(detail))

    def unfinished_partitions(self, day: date, slugs: Sequence[str]) -> list[str]:
        """Of `slugs`, in their order, those whose partition of `day` a run would still find
        work in (mdame.unfinished_partitions says when a partition is finished); an unknown
        slug is unfinished."""
        return list(self._scalar("unfinished_partitions", day, list(slugs)))

    def get_lock(self, lock_name: str) -> LockInfo | None:
        rows = self._select(
            """SELECT lock_name, holder, token, expires_at, released_at IS NOT NULL
                 FROM mdame.system_locks WHERE lock_name = %s""",
            [lock_name],
        )
        return LockInfo(*rows[0]) if rows else None
