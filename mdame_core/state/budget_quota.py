"""Budgets and quotas: money reserved under a cap and settled, and an account's upload quota
(in total and per bucket) reserved and committed; their reads."""

from __future__ import annotations

from datetime import date

from mdame_core.state.client import ClientBase
from mdame_core.state.records import BudgetUsage, QuotaUsage


class BudgetQuota(ClientBase):
    """The budget and quota RPCs and reads."""

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

    def reserve_bucket_quota(
        self, account_id: int, bucket: str, units: int, quota_key: str
    ) -> int | None:
        """On a fenced view, the pipeline's version: fenced by the account's dimension."""
        return self._scalar(
            "reserve_bucket_quota", account_id, bucket, units, quota_key, *self._fenced_tail()
        )

    def take_call_slot(self, account_id: int, bucket: str, limit: int, window_ms: int) -> int:
        """Takes one of the account's `limit` calls per `window_ms` sliding window: 0 when
        taken, else the milliseconds until one frees (nothing taken). Fenced on a fenced view."""
        return int(
            self._scalar(
                "take_call_slot", account_id, bucket, limit, window_ms, *self._fenced_tail()
            )
        )

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

    def open_quota_keys(self, prefix: str) -> list[str]:
        """The keys of quota reservations still open ('reserved') that start with `prefix`."""
        rows = self._select(
            """SELECT quota_key FROM mdame.quota_ledger
                WHERE state = 'reserved' AND starts_with(quota_key, %s) ORDER BY id""",
            [prefix],
        )
        return [key for (key,) in rows]

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
