"""A creator's per-minute call limits, kept through the ledger (mdame.call_windows), so that
every process and every run counts the same window and the platform never has to answer 429."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

from mdame_core.state import StateStore
from mdame_domain.channel import NotSent

# Added to the platform's window: the ledger records a call when it is taken, the platform when
# the request arrives (after a token refresh, over the network), so our window must end later.
WINDOW_GUARD_S = 2.0


class CallPacer:
    """Called with a limited call's bucket before the request: takes a slot of the account's
    window in the ledger, waiting for one while it frees before the request's deadline. A slot
    that frees too late leaves the call unsent (NotSent), for a later run to make."""

    def __init__(
        self,
        state: StateStore,
        account_id: int,
        platform: str,
        limits: Mapping[str, int],
        window_s: float,
        deadline: Callable[[], float | None],
        guard_s: float = WINDOW_GUARD_S,
    ) -> None:
        self.state, self.account_id, self.platform = state, account_id, platform
        self.limits, self.window_s, self.deadline = dict(limits), window_s, deadline
        self.guard_s = guard_s

    def __call__(self, bucket: str) -> None:
        limit = self.limits.get(bucket)
        if not limit:
            return
        window_ms = max(1, round((self.window_s + self.guard_s) * 1000))
        while wait_ms := self.state.take_call_slot(self.account_id, bucket, limit, window_ms):
            wait_s = wait_ms / 1000
            deadline = self.deadline()
            if deadline is not None and time.time() + wait_s >= deadline:
                raise NotSent(
                    f"{self.platform} allows {limit} {bucket} calls per {self.window_s:g} s for a "
                    f"creator, and all are taken; the next frees in {wait_s:.0f} s, after this "
                    "request's deadline: a later run makes the call"
                )
            time.sleep(wait_s)
