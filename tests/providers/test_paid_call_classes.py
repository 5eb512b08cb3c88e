"""Failure classes of the paid-call path, against the local Gemini server with the real
google-genai SDK: transient failures (429, 5xx, dropped connections, outages) never poison a
call, so a later run succeeds once Gemini answers; a permanent refusal (404 model, 401/403 key,
400 request) is sent once, alerted once with the fix, recorded, and refused without a request
until `mdame calls retry` re-arms it."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from mdame_cli.main import main as mdame
from mdame_core.state import StateStore
from mdame_domain.model_output import safety_verdict
from mdame_domain.paid_calls import failure_class, refusal_fix, refusal_scope
from mdame_resources.providers.gemini import (
    PaidCaller,
    PaidCallRefused,
    PaidCallTransient,
    PaidCallUnknown,
    json_config,
    make_client,
    response_json,
    synthesize_speech,
)
from tests.providers.gemkit import KEY, assert_balanced, context

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


class _Run:
    """One run's PaidCaller (a fresh client and caller, as a new step makes) with tiny backoff
    settings; the waits it asked for are kept instead of slept."""

    def __init__(self, fake, store: StateStore, **options: Any) -> None:
        self.waits: list[float] = []
        options.setdefault("transient_tries", 4)
        self.caller = PaidCaller(
            make_client(KEY, fake.base_url, 5.0),
            context(store),
            backoff_base_s=0.01,
            backoff_max_s=2.0,
            sleep=self.waits.append,
            **options,
        )

    def call(self, work_key: str = "work-1", model: str = MODEL) -> Any:
        return self.caller.call(
            work_key=work_key,
            model=model,
            contents="Is this fine?",
            config=json_config("classify", SCHEMA, 200, 0.0),
            parse=_parse,
        )


def _classes(store: StateStore, work_key: str = "work-1") -> list[tuple[str, str | None]]:
    return [(a.status, a.detail.get("failure_class")) for a in store.list_attempts(work_key)]


def _refusals(owner) -> list[tuple[str, str, bool]]:
    rows = owner.execute(
        "SELECT scope, provider, rearmed_at IS NULL FROM mdame.paid_call_refusals ORDER BY id"
    ).fetchall()
    return [tuple(r) for r in rows]


def _alerts(owner) -> list[tuple[str, int]]:
    rows = owner.execute(
        "SELECT text, occurrences FROM mdame.alerts WHERE cause = 'provider_refused'"
    ).fetchall()
    return [tuple(r) for r in rows]


def test_the_reviewers_burst_then_recovery_never_poisons_the_call(fake, fenced, owner):
    # Four transient errors in a few seconds, with the default cap of 4 billed failures.
    fake.faults.push("429", retry_after=1)
    fake.faults.push("429", retry_after=1)
    fake.faults.push("503")
    fake.faults.push("drop")
    first = _Run(fake, fenced)
    with pytest.raises(PaidCallUnknown, match=r"no answer: RemoteProtocolError \(gemini-3.8-flash"):
        first.call()
    assert fake.request_count == 4
    assert first.waits[:2] == [1.0, 1.0]  # Retry-After honoured, then the backoff
    assert len(first.waits) == 3  # no wait after the run's last try
    held = assert_balanced(owner)["held"]
    assert held > 0  # the dropped request may have been billed: its reservation is kept

    result = _Run(fake, fenced).call()  # the next run: no refusal, the call is made
    assert result.value["allowed"] is True and not result.cached
    assert fake.request_count == 5
    assert _classes(fenced) == [("failed", "transient")] * 4 + [("succeeded", None)]
    [dropped] = [a for a in fenced.list_attempts("work-1") if "settled_at_estimate" in a.detail]
    assert dropped.detail["settled_at_estimate"] == held
    book = assert_balanced(owner)
    assert book["held"] == 0 and book["reserved"] == book["settled"] + book["released"]
    assert book["spent"] == held + result.spent_micros
    assert _refusals(owner) == [] and _alerts(owner) == []


def test_an_outage_across_runs_heals_once_gemini_answers(fake, fenced, owner):
    fake.outage = 503
    for run in range(3):
        with pytest.raises(PaidCallTransient) as failure:
            _Run(fake, fenced, transient_tries=2).call()
        message = str(failure.value)
        assert "HTTP 503 UNAVAILABLE from gemini-3.8-flash: The service is currently" in message
        assert "2 tries in this run" in message and "later run tries again" in message
        assert fake.request_count == 2 * (run + 1)
    assert_balanced(owner)
    fake.outage = None
    result = _Run(fake, fenced, transient_tries=2).call()
    assert result.value["allowed"] is True
    assert _classes(fenced) == [("failed", "transient")] * 6 + [("succeeded", None)]
    book = assert_balanced(owner)
    assert book["released"] == 6 * book["rows"][0][1] and book["held"] == 0


def test_an_unknown_model_is_sent_once_alerted_once_and_rearmed_by_the_operator(
    fake, fenced, owner, fresh_db, monkeypatch, capsys
):
    model = "gemini-3.8-flash"
    fake.models.remove(model)  # the endpoint does not serve the configured model
    with pytest.raises(PaidCallRefused) as first:
        _Run(fake, fenced).call()
    message = str(first.value)
    assert f"HTTP 404 NOT_FOUND from {model}: models/{model} is not found" in message
    assert "gemini_text_model" in message and "mdame calls retry --dimension tech" in message
    # Dagster's RetryPolicy does not retry a Failure that forbids it.
    assert isinstance(first.value, dg.Failure) and first.value.allow_retries is False
    with pytest.raises(PaidCallRefused, match="refused for good") as again:
        _Run(fake, fenced).call()  # a later run: refused from the ledger
    assert "gemini_text_model" in str(again.value)
    with pytest.raises(PaidCallRefused):
        _Run(fake, fenced).call("work-2")  # another call of the same model
    assert fake.request_count == 1
    assert _refusals(owner) == [("model", f"gemini:{model}", True)]
    [(text, occurrences)] = _alerts(owner)
    assert occurrences == 1 and model in text and "gemini_text_model" in text
    assert "is not found for API version v1beta" in text  # the provider's own message
    assert_balanced(owner)
    assert _classes(fenced) == [("failed", "permanent")]

    monkeypatch.setenv("ENV", "dev")
    monkeypatch.setenv("MDAME_DATABASE_URL", fresh_db.owner)
    monkeypatch.setenv("MDAME_APP_DATABASE_URL", fresh_db.app)
    assert mdame(["calls", "retry", "--dimension", "nope"]) == 2
    assert "unknown dimension 'nope'" in capsys.readouterr().err
    assert mdame(["calls", "retry", "--dimension", "tech", "--day", "2000-01-01"]) == 0
    assert "no refused paid calls refused on 2000-01-01" in capsys.readouterr().out
    assert _refusals(owner)[0][2] is True  # another day's re-arm left it standing

    fake.models.append(model)  # the configuration is fixed
    assert mdame(["calls", "retry", "--dimension", "tech"]) == 0
    out = capsys.readouterr().out
    assert "re-armed 1 refused paid call(s)" in out and f"every call of gemini:{model}" in out
    result = _Run(fake, fenced).call()
    assert result.value["allowed"] is True and fake.request_count == 2
    assert _refusals(owner) == [("model", f"gemini:{model}", False)]
    assert_balanced(owner)


@pytest.mark.parametrize("status", [401, 403])
def test_a_refused_key_fails_at_once_naming_the_variable_never_the_key(fake, fenced, owner, status):
    fake.auth_error = status
    run = _Run(fake, fenced)
    with pytest.raises(PaidCallRefused) as failure:
        run.call()
    message = str(failure.value)
    assert f"HTTP {status}" in message and "API key not valid" in message
    assert "GEMINI_API_KEY" in message and KEY not in message
    assert run.waits == []  # no retry in this run
    assert _classes(fenced) == [("failed", "permanent")]
    # The key is refused for every Gemini call of the dimension, TTS included.
    with pytest.raises(PaidCallRefused, match="GEMINI_API_KEY"):
        synthesize_speech(
            "Hello there", "Kore", ctx=context(fenced), api_key=KEY, base_url=fake.base_url
        )
    with pytest.raises(PaidCallRefused):
        run.call("work-2")
    assert len(fenced.list_attempts("work-1")) == 1 and fenced.list_attempts("work-2") == []
    [(text, _)] = _alerts(owner)
    assert "GEMINI_API_KEY" in text and KEY not in text
    stored = owner.execute(
        "SELECT count(*) FROM mdame.paid_call_refusals WHERE cause::text LIKE %s",
        (f"%{KEY}%",),
    ).fetchone()
    assert stored == (0,)
    assert_balanced(owner)


def test_an_unknown_tts_model_names_its_own_field(fake, fenced):
    with pytest.raises(PaidCallRefused, match="gemini_tts_model") as failure:
        synthesize_speech(
            "Hello there",
            "Kore",
            ctx=context(fenced, gemini_prices=(("gemini-0-tts", 500_000, 9_000_000),)),
            api_key=KEY,
            model="gemini-0-tts",
            base_url=fake.base_url,
        )
    assert "gemini-0-tts" in str(failure.value) and fake.request_count == 1


def test_an_invalid_request_is_refused_for_that_request_only(fake, fenced, owner):
    fake.faults.push("400")
    with pytest.raises(PaidCallRefused, match="HTTP 400 INVALID_ARGUMENT"):
        _Run(fake, fenced).call()
    with pytest.raises(PaidCallRefused, match="refused for good"):
        _Run(fake, fenced).call()
    assert _Run(fake, fenced).call("work-2").value["allowed"] is True  # other requests go on
    assert fake.request_count == 2
    assert _refusals(owner) == [("request", f"gemini:{MODEL}", True)]


def test_transient_failures_recorded_before_the_classes_do_not_count(fake, fenced, owner):
    """Work keys that transient failures exhausted under the old rule are callable again."""
    fake.outage = 503
    with pytest.raises(PaidCallTransient):
        _Run(fake, fenced, transient_tries=4).call()
    fake.outage = None
    # As older code recorded them: no failure class.
    owner.execute("UPDATE mdame.provider_attempts SET detail = detail - 'failure_class'")
    assert _Run(fake, fenced, max_attempts=4).call().value["allowed"] is True


@pytest.mark.parametrize(
    ("error", "tries"),
    [(PaidCallRefused("HTTP 404 NOT_FOUND from m"), 1), (PaidCallTransient("HTTP 503"), 3)],
)
def test_the_steps_retry_policy_skips_a_refusal_and_retries_a_transient_failure(error, tries):
    seen: list[int] = []

    @dg.op(retry_policy=dg.RetryPolicy(max_retries=2))
    def paid_step() -> None:
        seen.append(1)
        raise error

    @dg.job
    def paid_job() -> None:
        paid_step()

    result = paid_job.execute_in_process(raise_on_error=False)
    assert not result.success and len(seen) == tries


def test_a_retry_after_longer_than_the_runs_wait_ends_the_run_at_once(fake, fenced, owner):
    fake.faults.push("429", retry_after=60)
    run = _Run(fake, fenced)
    with pytest.raises(PaidCallTransient, match="HTTP 429 RESOURCE_EXHAUSTED"):
        run.call()
    assert run.waits == [] and fake.request_count == 1  # no 60 s wait inside the step
    assert _Run(fake, fenced).call().value["allowed"] is True


@pytest.mark.parametrize(
    ("status", "kind", "scope"),
    [
        (400, "permanent", "request"),
        (401, "permanent", "key"),
        (403, "permanent", "key"),
        (404, "permanent", "model"),
        (409, "permanent", "request"),
        (408, "transient", "request"),
        (429, "transient", "request"),
        (499, "transient", "request"),
        (500, "transient", "request"),
        (503, "transient", "request"),
    ],
)
def test_status_classes_and_refusal_scopes(status, kind, scope):
    assert failure_class(status) == kind
    if kind == "permanent":
        assert refusal_scope(status) == scope
        fix = refusal_fix(status, model="m-1", model_field="gemini_tts_model", dimension="tech")
        assert "mdame calls retry --dimension tech" in fix
        assert ("GEMINI_API_KEY" in fix) == (status in (401, 403))
        assert ("gemini_tts_model" in fix) == (status != 401 and status != 403)
