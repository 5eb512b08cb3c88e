"""An alert's delivery claim is settled by its holder only (0023), on a real database.

A deliverer that was slow, whose claim lapsed and was taken over by another, must neither
clear the new holder's claim (a third deliverer would then send the alert again) nor send the
alert itself once it knows another holds it. Delivery goes through the real code
(mdame_resources.alerts) to the offline notifier, whose outbox lines are counted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from mdame_core.state import LeaseLost, StateStore
from mdame_resources.alerts import deliver_pending_alerts, raise_alert
from mdame_resources.notify import NotifyError, OutboxNotifier, read_outbox

WAIT_S = 30.0  # a step that never comes fails the test instead of hanging it


def _lapse(owner: psycopg.Connection, alert_id: int | None = None) -> None:
    """The claim's lease runs out (as the database's clock sees it) without anyone settling it."""
    owner.execute(
        "UPDATE mdame.alerts SET claimed_until = now() - interval '1 second' "
        "WHERE claimed_until IS NOT NULL AND (%(id)s::bigint IS NULL OR id = %(id)s)",
        {"id": alert_id},
    )


def _held(owner: psycopg.Connection, alert_id: int) -> tuple[bool, bool]:
    """(someone's claim is running, delivered) for the alert, as the owner reads it."""
    row = owner.execute(
        "SELECT coalesce(claimed_until > now(), false), delivered_at IS NOT NULL "
        "FROM mdame.alerts WHERE id = %s",
        [alert_id],
    ).fetchone()
    assert row is not None
    return row[0], row[1]


def _token(owner: psycopg.Connection, alert_id: int) -> Any:
    got = owner.execute("SELECT claim_token FROM mdame.alerts WHERE id = %s", [alert_id])
    return (got.fetchone() or (None,))[0]


def _wait(event: threading.Event, what: str) -> None:
    if not event.wait(WAIT_S):
        raise AssertionError(f"timed out waiting for {what}")


class _Gated:
    """A notifier whose send signals `sending`, waits for `go`, then delivers to `outbox`, or
    fails as a timed-out send does when `outbox` is None (a slow Telegram, step by step)."""

    def __init__(self, outbox: OutboxNotifier | None) -> None:
        self.outbox = outbox
        self.sending = threading.Event()
        self.go = threading.Event()

    def send_message(self, dimension: str | None, text: str) -> None:
        self.sending.set()
        _wait(self.go, "the test to let the send finish")
        if self.outbox is None:
            raise NotifyError("timed out")
        self.outbox.send_message(dimension, text)


class _Sweep(threading.Thread):
    def __init__(self, state: StateStore, notifier: Any) -> None:
        super().__init__(daemon=True)
        self.state, self.notifier = state, notifier
        self.result: tuple[int, int] | None = None

    def run(self) -> None:
        self.result = deliver_pending_alerts(self.state, self.notifier)


def test_a_stale_sweep_cannot_clear_the_new_holders_claim(
    state: StateStore, stage: Callable[[str], StateStore], owner: psycopg.Connection, tmp_path: Path
) -> None:
    outbox = OutboxNotifier(root=str(tmp_path))
    assert raise_alert(stage("tech"), None, "tech", "halt", "voice chain failed") == "undelivered"
    (alert_id,) = owner.execute("SELECT id FROM mdame.alerts").fetchone() or ()

    # Sweep A claims the alert; its send hangs past its claim, which lapses.
    slow = _Gated(None)
    a = _Sweep(state, slow)
    a.start()
    _wait(slow.sending, "sweep A to send")
    _lapse(owner)
    # Sweep B claims it and starts sending.
    b_notifier = _Gated(outbox)
    b = _Sweep(state, b_notifier)
    b.start()
    _wait(b_notifier.sending, "sweep B to send")
    assert _held(owner, alert_id) == (True, False)
    # A's send now times out: A records the failure with its lapsed claim, which must leave
    # B's claim as it is.
    slow.go.set()
    a.join(WAIT_S)
    assert a.result == (0, 1)
    assert _held(owner, alert_id) == (True, False)
    # A third sweep meanwhile finds nothing to send: B holds the alert.
    assert deliver_pending_alerts(state, outbox) == (0, 0)
    b_notifier.go.set()
    b.join(WAIT_S)
    assert b.result == (1, 0)

    assert len(read_outbox(tmp_path, "tech")) == 1  # delivered exactly once
    assert _held(owner, alert_id) == (False, True)
    assert deliver_pending_alerts(state, outbox) == (0, 0)


def test_a_sweep_does_not_send_what_another_took_over_meanwhile(
    state: StateStore, stage: Callable[[str], StateStore], owner: psycopg.Connection, tmp_path: Path
) -> None:
    outbox = OutboxNotifier(root=str(tmp_path))
    assert raise_alert(stage("tech"), None, "tech", "halt", "first") == "undelivered"
    assert raise_alert(stage("science"), None, "science", "halt", "second") == "undelivered"
    science = owner.execute("SELECT id FROM mdame.alerts WHERE dimension_slug = 'science'")
    (second,) = science.fetchone() or ()

    class SlowFirst:
        """Sweep A's notifier: its first send takes so long that the batch's second claim
        lapses, and sweep B claims and delivers that alert meanwhile."""

        def __init__(self) -> None:
            self.others: tuple[int, int] | None = None

        def send_message(self, dimension: str | None, text: str) -> None:
            if self.others is None:
                _lapse(owner, second)
                self.others = deliver_pending_alerts(state, outbox)
            outbox.send_message(dimension, text)

    slow = SlowFirst()
    delivered, failed = deliver_pending_alerts(state, slow)
    assert slow.others == (1, 0)  # B delivered the second alert
    assert (delivered, failed) == (1, 0)  # A delivered the first, and left the second alone
    assert [line["text"].splitlines()[-1] for line in read_outbox(tmp_path, "tech")] == ["first"]
    assert [line["text"].splitlines()[-1] for line in read_outbox(tmp_path, "science")] == [
        "second"
    ]


def test_only_the_current_token_settles_a_claim(
    state: StateStore, owner: psycopg.Connection
) -> None:
    assert raise_alert(state, None, None, "disk_low", "3% free") == "undelivered"
    (a,) = state.claim_undelivered_alerts()
    _lapse(owner)
    (b,) = state.claim_undelivered_alerts()
    assert b.alert_id == a.alert_id and b.claim_token != a.claim_token

    for stale in (
        lambda: state.mark_alert_delivered(a.alert_id, a.claim_token),
        lambda: state.mark_alert_failed(a.alert_id, "timed out", a.claim_token),
        lambda: state.renew_alert_claim(a.alert_id, a.claim_token),
    ):
        with pytest.raises(LeaseLost, match=f"alert {a.alert_id} is not claimed with this token"):
            stale()
        with pytest.raises(LeaseLost) as refused:
            stale()
        assert str(a.claim_token) not in str(refused.value)  # a bearer is never in a message
    assert _held(owner, a.alert_id) == (True, False)
    assert _token(owner, a.alert_id) == b.claim_token

    # A lapsed claim nobody took over is still its holder's: its failure is recorded.
    _lapse(owner)
    assert state.mark_alert_failed(b.alert_id, "timed out", b.claim_token) == 2
    assert _held(owner, b.alert_id) == (False, False) and _token(owner, b.alert_id) is None
    with pytest.raises(LeaseLost, match="its claim was released"):
        state.mark_alert_delivered(b.alert_id, b.claim_token)

    (c,) = state.claim_undelivered_alerts()
    assert state.renew_alert_claim(c.alert_id, c.claim_token, 60) > state.db_now()
    assert state.mark_alert_delivered(c.alert_id, c.claim_token) is True
    assert state.mark_alert_delivered(c.alert_id, c.claim_token) is False  # a retry: no change
    assert state.mark_alert_delivered(a.alert_id, a.claim_token) is False  # delivered, by C
