"""Operator alerts: counted once per dimension, cause and day (a dimension's under its pipeline
lock but for run_failure and check_blocked: see sql/functions/alerts.sql), and delivered under a
claim."""

from __future__ import annotations

from datetime import date, datetime
from uuid import UUID

from mdame_core.state.client import ClientBase
from mdame_core.state.records import AlertRecord, PendingAlert


class Alerts(ClientBase):
    """The alert RPCs."""

    def record_alert(
        self, dimension: str | None, cause: str, day: date, text: str, lease_s: int = 120
    ) -> AlertRecord:
        """Counts one occurrence of `cause` for the dimension (None: global) on UTC `day`. On a
        fenced view it carries the lock's token; unfenced, only an alert of no dimension, a
        run_failure or a check_blocked is recorded (Fenced otherwise)."""
        token = self._token() if self._fence is not None else None
        rows = self.call("record_alert", dimension or "", cause, day, text, lease_s, token)
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
