"""The fence: a pipeline lock held by this process."""

from __future__ import annotations

import threading
import time

from mdame_core.state.errors import FenceLost
from mdame_core.state.records import LockGrant, LockSecret, LockToken


class Fence:
    """The pipeline lock a writer holds: its token, its secret, and whether it is known to be
    lost.

    `token` is the lock's public fence number (what the work, the logs and the messages name);
    `secret` is what fenced RPCs carry, the holder's proof: the database refuses a call whose
    secret is not the live holder's, so reading the token (any app host may) proves nothing.
    The secret is never logged: the repr leaves it out. On this side, `check()` refuses before
    anything is sent once the lock is known lost (a heartbeat was refused) or could not be
    renewed before its lease ran out (the database unreachable): the holder makes no further
    call and no further side effect.
    """

    def __init__(self, lock_name: str, holder: str, grant: LockGrant, ttl_s: float) -> None:
        self.lock_name, self.holder, self.ttl_s = lock_name, holder, ttl_s
        self.token: LockToken = grant.token
        self._secret: LockSecret = grant.secret
        self._deadline = time.monotonic() + ttl_s  # the lease, measured from before acquiring
        self._lost: str | None = None
        self._guard = threading.Lock()

    @property
    def secret(self) -> LockSecret:
        return self._secret

    def __repr__(self) -> str:
        return f"Fence({self.lock_name!r}, holder={self.holder!r}, token={self.token})"

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
