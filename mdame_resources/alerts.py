"""Raising operator alerts: the one entry point the product calls where a cause happens.

`raise_alert` records the occurrence first (mdame.record_alert: one row per dimension, cause
and UTC day), then delivers only the day's first one through the notifier. A delivery that
fails leaves the row undelivered; `deliver_pending_alerts` (the alert sweep sensor) sends it
later, so a Telegram outage loses nothing. Raising an alert never raises: the path that hit
the cause (a HALT, a refused budget, a failed run) goes on as it would have without it.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Literal

from mdame_core.state import StateStore
from mdame_domain.alerts import alert_day, alert_text, require_cause
from mdame_resources.notify import NotifierResource, NotifyError

log = logging.getLogger(__name__)
Outcome = Literal["sent", "duplicate", "undelivered", "unrecorded"]


def raise_alert(
    state: StateStore,
    notifier: NotifierResource | None,
    dimension: str | None,
    cause: str,
    reason: str,
    *,
    now: datetime | None = None,
) -> Outcome:
    """Alert the operator that `cause` happened for `dimension` (None: no dimension).

    'sent': delivered now; 'duplicate': already raised today (counted only); 'undelivered':
    recorded, the sweep delivers it (no notifier, or it failed); 'unrecorded': the database
    refused or could not be reached (logged; nothing else to do)."""
    require_cause(cause)
    text = alert_text(dimension, cause, reason)
    try:
        record = state.record_alert(dimension, cause, alert_day(now), text)
    except Exception as exc:  # the cause's own path must go on: log, never raise
        log.warning("alert %s/%s not recorded: %s", dimension or "-", cause, type(exc).__name__)
        return "unrecorded"
    if not record.deliver:
        return "duplicate" if not record.fresh else "undelivered"
    if notifier is None:
        _failed(state, record.alert_id, "no notifier configured")
        return "undelivered"
    return "sent" if _deliver(state, notifier, record.alert_id, dimension, text) else "undelivered"


def deliver_pending_alerts(
    state: StateStore, notifier: NotifierResource, limit: int = 20
) -> tuple[int, int]:
    """The sweep: delivers alerts still undelivered (an outage, a crash before sending).
    Returns (delivered, failed)."""
    delivered = failed = 0
    for alert in state.claim_undelivered_alerts(limit):
        if _deliver(state, notifier, alert.alert_id, alert.dimension, alert.text):
            delivered += 1
        else:
            failed += 1
    return delivered, failed


def _deliver(
    state: StateStore, notifier: NotifierResource, alert_id: int, dimension: str | None, text: str
) -> bool:
    try:
        notifier.send_message(dimension, text)
    except Exception as exc:
        # NotifyError messages never hold the token; other errors are named by class only.
        reason = str(exc) if isinstance(exc, NotifyError) else type(exc).__name__
        log.warning("alert %s not delivered: %s", alert_id, reason)
        _failed(state, alert_id, reason)
        return False
    try:
        state.mark_alert_delivered(alert_id)
    except Exception as exc:  # sent, but not marked: the sweep may send it once more
        log.warning("alert %s sent but not marked delivered: %s", alert_id, type(exc).__name__)
    return True


def _failed(state: StateStore, alert_id: int, reason: str) -> None:
    try:
        state.mark_alert_failed(alert_id, reason[:2000] or "failed")
    except Exception as exc:  # the claim lapses on its own; the sweep retries then
        log.warning("alert %s failure not recorded: %s", alert_id, type(exc).__name__)
