"""A paid Gemini call whose holder died between the answer and its record is taken over once
the call's lease (the lock's expiry plus MDAME_GEMINI_GRACE_S) has passed: settled at its
estimate, then sent again. The grace is a setting, so a crash test shortens it instead of
waiting out the three-minute default."""

from __future__ import annotations

import psycopg
import pytest
from google.genai import types

from mdame_pipeline.locks import held_lock
from mdame_resources.providers.gemini import PaidCaller, make_client, response_json
from tests.liveness.liveness_kit import wait_for
from tests.providers.gemkit import DIMENSION, KEY, context

WORK_KEY = "grace-test:topic-1"
MODEL = "gemini-3.8-flash"


class Killed(BaseException):
    """Stands for the SIGKILL: nothing after it runs, not even the answer's record."""


def _call(caller: PaidCaller, parse) -> object:
    config = types.GenerateContentConfig(
        max_output_tokens=64,
        response_mime_type="application/json",
        response_json_schema={"type": "object", "properties": {"ok": {"type": "boolean"}}},
    )
    return caller.call(
        work_key=WORK_KEY, model=MODEL, contents="Is the sky blue?", config=config, parse=parse
    ).value


def _killed(_response: types.GenerateContentResponse) -> object:
    raise Killed


def test_a_dead_holders_call_is_taken_over_after_the_grace_setting(
    fake, db, owner: psycopg.Connection, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDAME_LOCK_TTL_S", "1")
    monkeypatch.setenv("MDAME_GEMINI_GRACE_S", "1")
    client = make_client(KEY, fake.base_url)
    with pytest.raises(Killed), held_lock(db, DIMENSION, "killed-holder") as dead:
        _call(PaidCaller(client, context(dead)), _killed)
    (status,) = owner.execute(
        "SELECT status FROM mdame.provider_attempts WHERE work_key = %s", [WORK_KEY]
    ).fetchone()
    assert status == "submitted"  # answered by Gemini, never recorded
    wait_for(
        "the dead holder's call lease to pass",
        lambda: owner.execute(
            "SELECT lease_expires_at < now() FROM mdame.provider_attempts WHERE work_key = %s",
            [WORK_KEY],
        ).fetchone()[0],
        timeout=10,
    )

    with held_lock(db, DIMENSION, "next-holder") as store:
        value = _call(PaidCaller(client, context(store)), response_json)

    assert value == {"ok": True}
    rows = owner.execute(
        """SELECT a.status, a.detail ? 'settled_at_estimate', l.state
             FROM mdame.provider_attempts a
             JOIN mdame.budget_ledger l ON l.attempt_key = a.detail ->> 'budget_key'
            WHERE a.work_key = %s ORDER BY a.attempt_no""",
        [WORK_KEY],
    ).fetchall()
    assert rows == [("failed", True, "settled"), ("succeeded", False, "settled")]
    assert fake.request_count == 2
