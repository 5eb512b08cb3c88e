"""Raising operator alerts: the one entry point the product calls where a cause happens.

`raise_alert` records the occurrence first (mdame.record_alert: one row per dimension, cause
and UTC day), then delivers only the day's first one through the notifier. A delivery that
fails leaves the row undelivered; `deliver_pending_alerts` (the alert sweep sensor) sends it
later, so a Telegram outage loses nothing. Raising an alert never raises: the path that hit
the cause (a HALT, a refused budget, a failed run) goes on as it would have without it.

Each delivery holds a claim with a token. It is settled with that token only: a
deliverer whose claim lapsed and was taken over is refused (LeaseLost) and changes nothing, so
it cannot free the alert for a third deliverer while the new holder sends it. The sweep renews
each claim right before sending and skips an alert another deliverer holds by then.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Literal
from uuid import UUID

from mdame_core.state import LeaseLost, StateConflict, StateStore
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
    if not record.deliver or record.claim_token is None:
        return "duplicate" if not record.fresh else "undelivered"
    claim = record.claim_token
    if notifier is None:
        _failed(state, record.alert_id, claim, "no notifier configured")
        return "undelivered"
    delivered = _deliver(state, notifier, record.alert_id, claim, dimension, text)
    return "sent" if delivered else "undelivered"


def deliver_pending_alerts(
    state: StateStore, notifier: NotifierResource, limit: int = 20, lease_s: int = 120
) -> tuple[int, int]:
    """The sweep: delivers alerts still undelivered (an outage, a crash before sending), each
    claimed for `lease_s` seconds. Returns (delivered, failed); an alert whose claim another
    deliverer took over meanwhile is neither (that deliverer sends it)."""
    delivered = failed = 0
    for alert in state.claim_undelivered_alerts(limit, lease_s):
        # Sending the batch's earlier alerts may have outlasted this claim: renew it first, and
        # leave the alert alone if another deliverer has it now.
        try:
            state.renew_alert_claim(alert.alert_id, alert.claim_token, lease_s)
        except (LeaseLost, StateConflict) as exc:  # taken over, or delivered already
            log.warning("alert %s not sent by this sweep: %s", alert.alert_id, exc)
            continue
        except Exception as exc:  # the claim lapses on its own; a later sweep sends it
            log.warning("alert %s not sent: %s", alert.alert_id, type(exc).__name__)
            continue
        claim = alert.claim_token
        if _deliver(state, notifier, alert.alert_id, claim, alert.dimension, alert.text):
            delivered += 1
        else:
            failed += 1
    return delivered, failed


def _deliver(
    state: StateStore,
    notifier: NotifierResource,
    alert_id: int,
    claim: UUID,
    dimension: str | None,
    text: str,
) -> bool:
    try:
        notifier.send_message(dimension, text)
    except Exception as exc:
        # NotifyError messages never hold the token; other errors are named by class only.
        reason = str(exc) if isinstance(exc, NotifyError) else type(exc).__name__
        log.warning("alert %s not delivered: %s", alert_id, reason)
        _failed(state, alert_id, claim, reason)
        return False
    try:
        state.mark_alert_delivered(alert_id, claim)
    except LeaseLost as exc:  # slower than the claim: another deliverer holds the alert now
        log.warning("alert %s sent, but its claim had been taken over: %s", alert_id, exc)
    except Exception as exc:  # sent, but not marked: the sweep may send it once more
        log.warning("alert %s sent but not marked delivered: %s", alert_id, type(exc).__name__)
    return True


def _failed(state: StateStore, alert_id: int, claim: UUID, reason: str) -> None:
    try:
        state.mark_alert_failed(alert_id, reason[:2000] or "failed", claim)
    except LeaseLost as exc:  # another deliverer holds it now: its claim is left alone
        log.warning("alert %s failure not recorded, its claim was taken over: %s", alert_id, exc)
    except Exception as exc:  # the claim lapses on its own; the sweep retries then
        log.warning("alert %s failure not recorded: %s", alert_id, type(exc).__name__)


def notifier_for_environment() -> NotifierResource:
    """The notifier of the chosen provider set, for code that runs outside a Dagster resource
    (a stage's step, a provider): the outbox offline, else Telegram with the MDAME_TELEGRAM_*
    variables read when it sends (a missing token or chat leaves the alert to the sweep)."""
    from mdame_resources.notify import OutboxNotifier, TelegramNotifier
    from mdame_resources.providers.selection import provider_set

    return OutboxNotifier() if provider_set() == "offline" else TelegramNotifier()


def raise_environment_alert(
    state: StateStore, dimension: str | None, cause: str, reason: str
) -> Outcome:
    """raise_alert through the environment's notifier: the one call the product's paths make."""
    try:
        notifier: NotifierResource | None = notifier_for_environment()
    except Exception as exc:  # a bad MDAME_PROVIDERS: recorded, the sweep delivers later
        log.warning("no notifier for alerts: %s", exc)
        notifier = None
    return raise_alert(state, notifier, dimension, cause, reason)
