"""The recovery pass on seeded stalled scripts of various ages and attempt counts.

Stalled long enough in voice_queued / render_queued: one attempt is counted and the script
stays for its stage to resume, or it is failed with the reason once max attempts are used.
Recently changed ones are left alone. A 'publishing' script is never failed while an upload's
outcome is unknown (the publications stage asks the channel), and giving up on a script
fails it, its pending publications and their quota together (fail_script). Concurrent passes
converge (the pipeline lock lets one act at a time; the other gets LockBusy and is retried, as
the RetryPolicy retries a step), and a pass that loses a race to another writer re-reads instead
of crashing.

The seeding writes under the dimension's pipeline lock (faultkit.seeding), as a run would.
"""

from __future__ import annotations

import threading
import time

from faultkit import (
    age,
    end_attempt_leases,
    owner_transaction,
    rows,
    seed_dimension,
    seed_script,
    seeding,
    wait_for,
)

from mdame_core.state import StateStore
from mdame_pipeline.locks import LockBusy, held_lock
from mdame_pipeline.recovery import (
    MAX_ATTEMPTS,
    STALL_AFTER_S,
    recover,
    recover_dimension_locked,
)
from tests.adminkit import as_admin

OLD = STALL_AFTER_S * 6  # stalled for an hour
RECENT = 60.0  # changed a minute ago: a run may just have crashed, or still be on it


def _stalled(
    state: StateStore,
    owner_url: str,
    dimension_id: int,
    name: str,
    in_state: str,
    attempts: int,
    seconds: float,
) -> int:
    """A script in `in_state` with `attempts` counted, last changed `seconds` ago. `state`
    holds the dimension's lock (faultkit.seeding)."""
    script = seed_script(state, dimension_id, name, in_state, attempts)
    age(owner_url, "scripts", script, seconds)
    return script


def _publication(
    state: StateStore,
    owner_url: str,
    script_id: int,
    account_id: int,
    name: str,
    attempt_status: str | None,
) -> None:
    """A publication as a crash or a timeout leaves it: quota reserved; with attempt_status,
    mid-upload with that attempt (submitted by a holder whose lease has run out since, as a
    crashed run's has). `state` holds the dimension's lock."""
    render = state.upsert_work_unit("render", f"render:{name}", {"script_id": script_id})
    key = f"publication:{name}"
    pub = state.upsert_work_unit(
        "publication",
        key,
        {"script_id": script_id, "render_id": render, "account_id": account_id},
    )
    assert as_admin(state).reserve_quota(account_id, 1600, key) is not None
    if attempt_status is not None:
        state.transition("publication", pub, "pending", "uploading")
        attempt = as_admin(state).record_attempt(key, "OutboxPublisher", "0" * 64, "submitted")
        if attempt_status == "unknown":
            as_admin(state).finish_attempt(attempt, "unknown")
        end_attempt_leases(owner_url, key)
    age(owner_url, "scripts", script_id, OLD)


def _unit(state: StateStore, kind: str, unit_id: int):
    return state.get_work_unit(kind, unit_id)


def test_stalled_scripts_resume_or_fail_and_publishing_is_left_to_reconcile(state, fresh_db):
    dim, account = seed_dimension(state)
    other, _ = seed_dimension(state, "cooking")
    url = fresh_db.owner
    with seeding(state) as w, seeding(state, "cooking") as w_other:
        ids = {
            "voice_0": _stalled(w, url, dim, "v0", "voice_queued", 0, OLD),
            "render_2": _stalled(w, url, dim, "r2", "render_queued", 2, OLD),
            "voice_max": _stalled(w, url, dim, "v3", "voice_queued", MAX_ATTEMPTS, OLD),
            "render_over": _stalled(w, url, dim, "r5", "render_queued", 5, OLD),
            "voice_recent": _stalled(w, url, dim, "vr", "voice_queued", MAX_ATTEMPTS, RECENT),
            "render_recent": _stalled(w, url, dim, "rr", "render_queued", 0, RECENT),
            "voiced_old": _stalled(w, url, dim, "vo", "voiced", MAX_ATTEMPTS, OLD),
            "other_dimension": _stalled(
                w_other, url, other, "od", "voice_queued", MAX_ATTEMPTS, OLD
            ),
        }
        for name, status, attempts in [
            ("pub_out", "unknown", MAX_ATTEMPTS),  # uploaded, answer lost
            ("pub_lost", "submitted", MAX_ATTEMPTS),  # crashed mid-upload
            ("pub_pending", None, 0),  # never got to the upload
        ]:
            ids[name] = seed_script(w, dim, name, "publishing", attempts)
            _publication(w, url, ids[name], account, name, status)
    before = {name: _unit(state, "script", i) for name, i in ids.items()}

    # Without a publisher (the pipeline's pass in trends): publishing is left to be reconciled.
    blind = recover_dimension_locked(state, "science")

    pub_out = state.get_work_unit("publication", "publication:pub_out")
    assert pub_out.state == "uploading"
    assert [a.status for a in state.list_attempts("publication:pub_out")] == ["unknown"]
    assert _unit(state, "script", ids["pub_out"]).state == "publishing"
    assert _unit(state, "script", ids["pub_lost"]).state == "publishing"
    assert sorted(blind.to_reconcile) == sorted([ids["pub_out"], ids["pub_lost"]])

    after = {name: _unit(state, "script", i) for name, i in ids.items()}
    # Stalled below max attempts: one attempt counted, still resumable where it stalled.
    for name in ("voice_0", "render_2", "pub_pending"):
        assert after[name].state == before[name].state, name
        assert after[name].attempts == before[name].attempts + 1, name
    # At max attempts: failed, with the reason.
    for name in ("voice_max", "render_over"):
        assert after[name].state == "failed", name
        assert before[name].state in after[name].result["reason"], name
    # Recent, not in progress, or another dimension's: untouched.
    for name in ("voice_recent", "render_recent", "voiced_old", "other_dimension"):
        assert after[name] == before[name], name

    # The pass never asks the channel nor fails an upload in flight: the publications stage
    # takes it over through the publisher's own resume path. A pass right after changes nothing.
    snapshot = {name: _unit(state, "script", i) for name, i in ids.items()}
    again = recover_dimension_locked(state, "science")
    assert sorted(again.to_reconcile) == sorted([ids["pub_out"], ids["pub_lost"]])
    assert {name: _unit(state, "script", i) for name, i in ids.items()} == snapshot
    assert state.get_work_unit("publication", "publication:pub_lost").state == "uploading"


def test_two_concurrent_passes_converge(state, fresh_db):
    dim, _ = seed_dimension(state)
    with seeding(state) as w:
        retry = [
            _stalled(w, fresh_db.owner, dim, f"r{i}", "voice_queued", 1, OLD) for i in range(24)
        ]
        fail = [
            _stalled(w, fresh_db.owner, dim, f"f{i}", "render_queued", MAX_ATTEMPTS, OLD)
            for i in range(8)
        ]
    start, errors, busy = threading.Barrier(2), [], []

    def one_pass() -> None:
        try:
            with StateStore(fresh_db.app, env="dev", pool_max=2) as mine:
                start.wait()
                deadline = time.monotonic() + 30
                while True:
                    try:
                        recover_dimension_locked(mine, "science")
                        return
                    except LockBusy:
                        # The other pass holds the lock: retried later, as the RetryPolicy does.
                        busy.append(1)
                        assert time.monotonic() < deadline, "the lock was never free"
                        time.sleep(0.05)
        except Exception as exc:  # reported below
            errors.append(exc)

    passes = [threading.Thread(target=one_pass) for _ in range(2)]
    for t in passes:
        t.start()
    for t in passes:
        t.join(60)

    assert errors == []
    for script in retry:  # counted once, not once per pass
        unit = _unit(state, "script", script)
        assert (unit.state, unit.attempts) == ("voice_queued", 2)
        assert [e.event for e in state.list_events("script", script)].count("attempt") == 2
    for script in fail:
        events = state.list_events("script", script)
        assert _unit(state, "script", script).state == "failed"
        assert [e.to_state for e in events if e.event == "transition"].count("failed") == 1


def test_a_pass_that_loses_a_race_re_reads_instead_of_crashing(state, fresh_db):
    dim, _ = seed_dimension(state)
    with seeding(state) as w:
        script = _stalled(w, fresh_db.owner, dim, "raced", "voice_queued", MAX_ATTEMPTS, OLD)
    outcome: dict = {}

    def one_pass() -> None:
        try:
            with (
                StateStore(fresh_db.app, env="dev", pool_max=2) as mine,
                held_lock(mine, "science", "raced-pass") as fenced,
            ):
                outcome["report"] = recover(fenced, dim)
        except Exception as exc:  # reported below
            outcome["error"] = exc

    with owner_transaction(fresh_db.owner) as other_writer:
        # Another writer holds the row and moves it on while the pass waits to fail it. Under
        # the fence no app writer can (every script write needs the lock the pass holds), so it
        # is one outside the app, as the owner. fail_script names the state the pass decided
        # on, so the move makes it refuse (MD003) and the pass re-reads instead of failing it.
        other_writer.execute("SELECT 1 FROM mdame.scripts WHERE id = %s FOR UPDATE", (script,))
        racer = threading.Thread(target=one_pass)
        racer.start()
        wait_for(
            "the pass to wait on the script row",
            lambda: rows(
                fresh_db.owner,
                """SELECT 1 FROM pg_stat_activity WHERE datname = current_database()
                    AND wait_event_type = 'Lock' AND query LIKE '%%mdame.fail_script(%%'""",
            ),
        )
        other_writer.execute(
            "SELECT mdame._transition('script', %s, 'voice_queued', 'halted', '{}')", (script,)
        )
    racer.join(30)

    assert "error" not in outcome, outcome.get("error")
    assert _unit(state, "script", script).state == "halted"  # the other writer's move stands
    assert outcome["report"].failed == []
