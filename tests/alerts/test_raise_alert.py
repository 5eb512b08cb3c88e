"""raise_alert and the sweep on a real database, delivering to the local Telegram server."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from fakes.telegram import TelegramServer
from mdame_core.state import Fenced, InvalidInput, StateStore
from mdame_resources.alerts import deliver_pending_alerts, raise_alert
from mdame_resources.notify import OutboxNotifier, TelegramNotifier, read_outbox

NOON = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
Stage = Callable[[str], StateStore]


def test_one_message_per_cause_and_day(
    state: StateStore, stage: Stage, telegram_env: TelegramServer
) -> None:
    notifier, tech = TelegramNotifier(), stage("tech")
    assert raise_alert(tech, notifier, "tech", "halt", "voice chain failed", now=NOON) == "sent"
    later = NOON + timedelta(hours=5)
    assert raise_alert(tech, notifier, "tech", "halt", "again", now=later) == "duplicate"
    # Another cause, another dimension, the global scope: each its own alert.
    assert raise_alert(tech, notifier, "tech", "budget_cap", "cap", now=NOON) == "sent"
    assert raise_alert(stage("science"), notifier, "science", "halt", "x", now=NOON) == "sent"
    assert raise_alert(state, notifier, None, "halt", "x", now=NOON) == "sent"
    assert raise_alert(tech, notifier, "tech", "halt", "next day", now=NOON + timedelta(days=1))
    texts = [m.fields["text"] for m in telegram_env.messages]
    assert len(texts) == 5
    assert texts[0] == "MD-AME alert · tech · HALT: nothing was published\nvoice chain failed"
    assert texts[4].endswith("next day")


def test_an_outage_loses_nothing(
    state: StateStore, stage: Stage, telegram_env: TelegramServer, owner: psycopg.Connection
) -> None:
    notifier, tech = TelegramNotifier(backoff_s=0.01, server_retries=1), stage("tech")
    telegram_env.set_down(502)
    assert raise_alert(tech, notifier, "tech", "reauth_needed", "grant revoked") == "undelivered"
    assert raise_alert(tech, notifier, "tech", "reauth_needed", "again") == "undelivered"
    assert telegram_env.messages == []
    row = owner.execute(
        "SELECT occurrences, attempts, delivered_at, last_error FROM mdame.alerts"
    ).fetchone()
    assert row is not None and row[0] == 2 and row[2] is None and "502" in row[3]
    assert deliver_pending_alerts(state, notifier) == (0, 1)  # still down
    telegram_env.set_down(None)
    assert deliver_pending_alerts(state, notifier) == (1, 0)
    assert deliver_pending_alerts(state, notifier) == (0, 0)  # delivered once, never again
    (sent,) = telegram_env.messages
    assert "re-authorization" in sent.fields["text"]


def test_a_claimed_alert_is_not_swept_twice(
    state: StateStore, stage: Stage, owner: psycopg.Connection
) -> None:
    # The raiser holds its claim while it sends: a concurrent sweep leaves the alert alone.
    record = stage("tech").record_alert("tech", "quota_exhausted", NOON.date(), "quota")
    assert record.fresh and record.deliver
    assert state.claim_undelivered_alerts() == []
    owner.execute("UPDATE mdame.alerts SET claimed_until = now() - interval '1 second'")
    (pending,) = state.claim_undelivered_alerts()  # a raiser that died: its claim lapsed
    assert (pending.dimension, pending.cause, pending.text) == ("tech", "quota_exhausted", "quota")
    assert state.claim_undelivered_alerts() == []


def test_offline_alerts_go_to_the_outbox(state: StateStore, tmp_path: Path) -> None:
    outbox = OutboxNotifier(root=str(tmp_path))
    # A blocking check raises it with no lock (asset checks take none).
    assert raise_alert(state, outbox, "tech", "check_blocked", "render_quality failed") == "sent"
    (line,) = read_outbox(tmp_path, "tech")
    assert line["text"].startswith("MD-AME alert · tech · a blocking check failed")


def test_bad_alerts_are_refused(state: StateStore, stage: Stage) -> None:
    day, tech = NOON.date(), stage("tech")
    with pytest.raises(InvalidInput, match="unknown alert cause"):
        tech.record_alert("tech", "meltdown", day, "x")
    with pytest.raises(InvalidInput, match="dimension_slug"):
        tech.record_alert("Not A Slug", "halt", day, "x")
    with pytest.raises(InvalidInput, match="text"):
        tech.record_alert("tech", "halt", day, "")
    with pytest.raises(InvalidInput, match="lease_s"):
        tech.record_alert("tech", "halt", day, "x", lease_s=0)
    with pytest.raises(InvalidInput, match="limit"):
        state.claim_undelivered_alerts(0)
    with pytest.raises(ValueError, match="unknown alert cause"):
        raise_alert(tech, None, "tech", "meltdown", "x")
    # No notifier at all: recorded, left to the sweep.
    assert raise_alert(state, None, None, "disk_low", "3% free") == "undelivered"


def test_a_dimensions_alert_is_recorded_under_its_lock_only(
    state: StateStore, stage: Stage, owner: psycopg.Connection
) -> None:
    """No holder silences another dimension's alert for the day by recording it first: a
    dimension's alert needs that dimension's lock, but for the two raised where none is held
    (a run's failure, after it ended; a blocking asset check, which takes no lock)."""
    day, news = NOON.date(), stage("news")
    stage("tech")
    with pytest.raises(Fenced, match="pipeline:tech"):
        news.record_alert("tech", "halt", day, "forged")
    with pytest.raises(Fenced, match="needs its pipeline lock token"):
        state.record_alert("tech", "budget_cap", day, "forged")
    assert raise_alert(state, None, "tech", "halt", "forged") == "unrecorded"
    assert owner.execute("SELECT count(*) FROM mdame.alerts").fetchone() == (0,)
    assert state.record_alert("tech", "run_failure", day, "content_job failed").fresh
    assert state.record_alert("tech", "check_blocked", day, "render_quality failed").fresh
    assert state.record_alert(None, "disk_low", day, "3% free").fresh
