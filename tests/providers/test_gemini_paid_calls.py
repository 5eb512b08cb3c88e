"""The paid-call path against the local Gemini server with the real google-genai SDK: every
fault gives a clear error and leaves the budget ledger balanced; an unknown outcome keeps its
reservation until the next try settles it at the estimate; the cap stops paid work; 50
concurrent calls against a cap that fits 20 let exactly 20 through. The failure classes
(transient, permanent) are in test_paid_call_classes.py."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from mdame_core.state import StateStore
from mdame_domain.model_output import InvalidModelOutput, safety_verdict
from mdame_domain.paid_calls import estimate_micros, estimate_prompt_tokens, price_for
from mdame_resources.providers.budget import BudgetExhausted
from mdame_resources.providers.gemini import (
    ModelBlocked,
    PaidCaller,
    PaidCallFailed,
    PaidCallTransient,
    PaidCallUnknown,
    json_config,
    make_client,
    response_json,
)
from tests.adminkit import as_admin
from tests.providers.gemkit import KEY, assert_balanced, context, ledger

MODEL = "gemini-3.8-flash"
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "allowed": {"type": "boolean"},
        "categories": {"type": "array", "items": {"type": "string"}},
        "reason": {"type": "string", "description": "one sentence of 8-12 words"},
    },
    "required": ["allowed", "categories", "reason"],
}


def _parse(response: Any) -> Any:
    data = response_json(response)
    safety_verdict(data)
    return data


def _caller(
    fake, store: StateStore, *, timeout_s: float = 10.0, tries: int = 3, **changes: Any
) -> PaidCaller:
    client = make_client(KEY, fake.base_url, timeout_s)
    return PaidCaller(
        client,
        context(store, **changes),
        max_attempts=3,
        transient_tries=tries,
        sleep=lambda s: None,
    )


def _call(caller: PaidCaller, work_key: str = "work-1", text: str = "Is this fine?") -> Any:
    return caller.call(
        work_key=work_key,
        model=MODEL,
        contents=text,
        config=json_config("classify", SCHEMA, 200, 0.0),
        parse=_parse,
    )


def test_success_settles_at_actual_usage_and_a_repeat_is_not_paid_again(fake, fenced, owner):
    caller = _caller(fake, fenced)
    first = _call(caller)
    assert first.value["allowed"] is True and first.spent_micros > 0 and not first.cached
    again = _call(caller)
    assert again.cached and again.value == first.value and again.spent_micros == 0
    assert fake.request_count == 1  # the stored answer came back: nothing paid twice
    book = assert_balanced(owner)
    assert book["spent"] == first.spent_micros < book["settled"]  # actual below the estimate
    [attempt] = fenced.list_attempts("work-1")
    assert attempt.status == "succeeded" and len(attempt.request_hash) == 64


@pytest.mark.parametrize(
    "kind", ["500", "503", "429", "malformed", "schema", "empty", "max_tokens"]
)
def test_a_transient_fault_is_retried_through_the_ledger(fake, fenced, owner, kind):
    fake.faults.push(kind, retry_after=0) if kind == "429" else fake.faults.push(kind)
    result = _call(_caller(fake, fenced))
    assert result.value["allowed"] is True
    attempts = fenced.list_attempts("work-1")
    assert [a.status for a in attempts] == ["failed", "succeeded"]
    book = assert_balanced(owner)
    billed = kind in (
        "malformed",
        "schema",
        "empty",
        "max_tokens",
    )  # a 200 is billed, a refusal is not
    assert (book["released"] == 0) == billed


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("500", "HTTP 500 INTERNAL from gemini-3.8-flash: An internal error has occurred."),
        ("503", "HTTP 503 UNAVAILABLE from gemini-3.8-flash: The model is overloaded."),
        ("429", "HTTP 429 RESOURCE_EXHAUSTED from gemini-3.8-flash: Resource has been"),
    ],
)
def test_a_persistent_transient_fault_ends_the_run_and_the_next_run_tries_again(
    fake, fenced, owner, kind, message
):
    for _ in range(3):
        fake.faults.push(kind, retry_after=0) if kind == "429" else fake.faults.push(kind)
    with pytest.raises(PaidCallTransient, match=message) as failure:
        _call(_caller(fake, fenced))
    assert "3 tries in this run" in str(failure.value)
    assert fake.request_count == 3
    assert [a.status for a in fenced.list_attempts("work-1")] == ["failed"] * 3
    assert_balanced(owner)
    # Nothing counted against the call: the next run makes it.
    assert _call(_caller(fake, fenced)).value["allowed"] is True
    assert fake.request_count == 4


@pytest.mark.parametrize(
    ("kind", "message"),
    [
        ("malformed", "not JSON"),
        ("schema", "invalid answer"),
        ("empty", "no candidates"),
        ("max_tokens", "cut off at max_output_tokens"),
    ],
)
def test_billed_unusable_answers_are_capped_per_work_key_naming_the_last_cause(
    fake, fenced, owner, kind, message
):
    for _ in range(3):
        fake.faults.push(kind)
    with pytest.raises(PaidCallFailed, match=message) as failure:
        _call(_caller(fake, fenced))
    assert "got 3 billed answers it could not use" in str(failure.value)
    assert fake.request_count == 3
    assert [a.status for a in fenced.list_attempts("work-1")] == ["failed"] * 3
    assert_balanced(owner)
    # Across runs too: the work key has spent its attempts, and the error still names why.
    with pytest.raises(PaidCallFailed, match=f"not retried again \\(last: .*{message}"):
        _call(_caller(fake, fenced))
    assert fake.request_count == 3


def test_429_honours_retry_after(fake, fenced):
    fake.faults.push("429", retry_after=7)
    waits: list[float] = []
    caller = PaidCaller(make_client(KEY, fake.base_url), context(fenced), sleep=waits.append)
    _call(caller)
    assert waits == [7.0]


@pytest.mark.parametrize("kind", ["safety", "safety_finish"])
def test_a_safety_block_is_a_billed_definite_decision(fake, fenced, owner, kind):
    fake.faults.push(kind)
    with pytest.raises(ModelBlocked, match="blocked"):
        _call(_caller(fake, fenced))
    assert fake.request_count == 1  # never retried
    [attempt] = fenced.list_attempts("work-1")
    assert attempt.status == "failed" and attempt.detail["blocked"] is True
    book = assert_balanced(owner)
    assert book["settled"] > 0 and book["held"] == 0


def test_a_timeout_is_unknown_then_the_next_run_settles_it_at_the_estimate(fake, fenced, owner):
    fake.faults.push("hang", hang_s=3)
    with pytest.raises(PaidCallUnknown, match="no answer: ReadTimeout"):
        _call(_caller(fake, fenced, timeout_s=0.5, tries=1))
    book = assert_balanced(owner)
    assert book["held"] > 0 and book["settled"] == 0  # the reservation is kept
    assert [a.status for a in fenced.list_attempts("work-1")] == ["unknown"]
    result = _call(_caller(fake, fenced))  # the next run
    attempts = fenced.list_attempts("work-1")
    assert [a.status for a in attempts] == ["failed", "succeeded"]
    assert attempts[0].detail["settled_at_estimate"] == book["held"]
    after = assert_balanced(owner)
    assert after["held"] == 0 and after["spent"] == book["held"] + result.spent_micros


def test_a_dropped_connection_is_unknown(fake, fenced, owner):
    fake.faults.push("drop")
    with pytest.raises(PaidCallUnknown, match="no answer"):
        _call(_caller(fake, fenced, tries=1))
    assert assert_balanced(owner)["held"] > 0


def test_an_unreachable_server_releases_the_reservation(fenced, owner):
    client = make_client(KEY, "http://127.0.0.1:9", 2.0)  # nothing listens on port 9
    caller = PaidCaller(client, context(fenced), transient_tries=2, sleep=lambda s: None)
    with pytest.raises(PaidCallTransient, match="not sent: ConnectError"):
        _call(caller)
    book = assert_balanced(owner)
    assert book["released"] == book["reserved"] > 0


def _register_cap(store: StateStore, micros: int) -> None:
    """What `mdame dimensions sync` does for a YAML with this daily_budget_usd: the cap a paid
    call applies is the registry's, never the caller's."""
    admin = as_admin(store)
    row = admin.get_dimension("tech")
    assert row is not None
    admin.upsert_dimension("tech", row.title, {**row.config, "daily_budget_micros": micros})


def test_the_cap_stops_paid_work_with_an_event(fake, fenced, owner):
    price = price_for(MODEL)
    one = estimate_micros(price, "classify\nIs this fine?", 200)
    _register_cap(fenced, one)
    caller = _caller(fake, fenced, daily_budget_micros=one)
    _call(caller, "a")
    with pytest.raises(BudgetExhausted, match="daily budget of dimension 'tech' is exhausted"):
        _call(caller, "b")  # a's actual left too little for b's estimate
    assert fake.request_count == 1
    events = owner.execute(
        "SELECT detail FROM mdame.events WHERE event = 'budget_exhausted'"
    ).fetchall()
    assert len(events) == 1 and events[0][0]["scope"] == "dimension:tech"
    assert fenced.list_attempts("b") == []  # nothing recorded for the refused call
    assert_balanced(owner)


def test_budget_race_50_calls_against_a_cap_that_fits_20(fake, fenced, owner):
    text = "Is this fine?"
    config = json_config("classify", SCHEMA, 200, 0.0)
    price = price_for(MODEL)
    one = estimate_micros(price, f"classify\n{text}", 200)
    # Each call costs exactly its estimate, so the order of settles cannot free room.
    fake.usage = {
        "promptTokenCount": estimate_prompt_tokens(f"classify\n{text}"),
        "candidatesTokenCount": 200,
    }
    store = StateStore(fenced.url, env="dev", pool_max=12).fenced(fenced.fence)
    _register_cap(fenced, 20 * one)
    caller = _caller(fake, store, daily_budget_micros=20 * one)
    barrier = threading.Barrier(50)

    def one_call(i: int) -> str:
        barrier.wait()
        try:
            caller.call(
                work_key=f"race-{i}", model=MODEL, contents=text, config=config, parse=_parse
            )
        except BudgetExhausted:
            return "refused"
        return "paid"

    try:
        with ThreadPoolExecutor(50) as pool:
            outcomes = list(pool.map(one_call, range(50)))
    finally:
        store.close()
    assert outcomes.count("paid") == 20 and outcomes.count("refused") == 30
    assert fake.request_count == 20
    book = assert_balanced(owner)
    assert book["spent"] == 20 * one == book["settled"] and book["held"] == 0
    assert len(ledger(owner)["rows"]) == 20


def test_invalid_output_never_passes_validation():
    with pytest.raises(InvalidModelOutput):
        safety_verdict({"allowed": "yes", "categories": [], "reason": "fine"})
