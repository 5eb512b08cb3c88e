"""Provider attempts, and paid provider calls: the budget and attempt ledgers together."""

from __future__ import annotations

from datetime import date, datetime

from mdame_core.state.client import ClientBase, JsonObject, _obj
from mdame_core.state.records import Attempt, PaidCallStart, RearmedCall


class AttemptsPaidCalls(ClientBase):
    """The provider-attempt and paid-call RPCs, and the read of attempts."""

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

    def settle_orphaned_paid_calls(self, dimension_slug: str) -> int:
        """Settles at their estimate the dimension's paid calls whose holder is gone (lease run
        out) and that nobody asked for again; how many. Under the dimension's lock."""
        return int(self._scalar("settle_orphaned_paid_calls", dimension_slug, self._token()))

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

    def list_attempts(self, work_key: str) -> list[Attempt]:
        rows = self._select(
            """SELECT id, work_key, attempt_no, provider, request_hash, status, detail
                 FROM mdame.provider_attempts WHERE work_key = %s ORDER BY attempt_no""",
            [work_key],
        )
        return [Attempt(*row) for row in rows]
