"""The relevance gate's judge against the local Gemini server, with the real google-genai SDK:
keyframes of a clip (fakes/imagery.footage_mp4) and the narration go out as one paid call; the
server's image judge answers on topic for a clip of a narrated word and off topic for another
word's. Every call is reserved, settled on the price and classed as the paid path classes them,
and a rerun after a crash never sends a judgement's request twice."""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fakes import imagery
from mdame_core.state import StateStore, set_commit_observer
from mdame_domain.media_store import sha256_file
from mdame_domain.paid_calls import cost_micros, price_for
from mdame_domain.relevance import (
    BLOCKED,
    JUDGED,
    UNUSABLE,
    RelevanceSettings,
    judgement_work_key,
)
from mdame_pipeline.locks import held_lock
from mdame_resources.providers.gemini import PaidCallInFlight, PaidCallRefused, make_client
from mdame_resources.providers.relevance import judge_clip
from tests.liveness.liveness_kit import wait_for
from tests.providers.gemkit import DIMENSION, KEY, assert_balanced, context

NARRATION = "The telescope spotted a comet low over the horizon"
ON_TOPIC, OFF_TOPIC = "telescope", "banana"
SETTINGS = RelevanceSettings(threshold=0.6)


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("clips")
    made = {}
    for word in (ON_TOPIC, OFF_TOPIC):
        made[word] = folder / f"{word}.mp4"
        made[word].write_bytes(imagery.footage_mp4(word, 144, 256, 1.5))
    return made


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDAME_GEMINI_BACKOFF_S", "0.01")


def _judge(fake, store: StateStore, clip: Path, scene: str = "scene-1", **changes: Any):
    return judge_clip(
        clip,
        NARRATION,
        scene_key=scene,
        ctx=context(store, **changes),
        api_key=KEY,
        settings=SETTINGS,
        base_url=fake.base_url,
        timeout_s=10.0,
    )


def _server_billed_micros(fake) -> int:
    price = price_for(SETTINGS.model)
    return sum(
        cost_micros(
            price,
            b["usage"]["promptTokenCount"],
            b["usage"]["candidatesTokenCount"],
            b["usage"]["thoughtsTokenCount"],
        )
        for b in fake.counters()["billed"]
    )


def test_an_on_topic_clip_passes_an_off_topic_one_fails_and_the_ledger_is_the_servers_bill(
    fake, fenced, owner, clips
):
    on = _judge(fake, fenced, clips[ON_TOPIC])
    assert on.passed and on.verdict == JUDGED and on.score == imagery.ON_TOPIC_SCORE
    assert "telescope" in on.reason
    off = _judge(fake, fenced, clips[OFF_TOPIC])
    assert not off.passed and off.score == imagery.OFF_TOPIC_SCORE
    assert off.describe() == ("0.12 below 0.60: the frames show nothing the narration talks about")
    # What went out: two small JPEG keyframes and the narration's line, structured output.
    body = fake.requests[0].body
    parts = body["contents"][0]["parts"]
    frames = [base64.urlsafe_b64decode(p["inlineData"]["data"] + "==") for p in parts[:2]]
    assert all(f.startswith(b"\xff\xd8") for f in frames) and len(parts) == 3
    assert f"Narration: {NARRATION}" in parts[2]["text"]
    assert body["generationConfig"]["responseMimeType"] == "application/json"
    assert fake.counters()["billed"][0]["usage"]["promptTokenCount"] > 2 * 258

    book = assert_balanced(owner)
    assert book["spent"] == _server_billed_micros(fake) > 0
    # The same scene and clip again: the judgement made is read back, nothing is sent.
    again = _judge(fake, fenced, clips[ON_TOPIC])
    assert again == on and fake.request_count == 2
    # Another scene's judgement of the same clip is its own call.
    assert _judge(fake, fenced, clips[ON_TOPIC], scene="scene-2").passed
    assert fake.request_count == 3


def test_a_5xx_burst_heals_within_the_run(fake, fenced, owner, clips):
    for kind in ("503", "500", "503"):
        fake.faults.push(kind)
    judgement = _judge(fake, fenced, clips[ON_TOPIC])
    assert judgement.passed
    key = judgement_work_key(DIMENSION, "scene-1", _sha(clips[ON_TOPIC]), SETTINGS.model)
    assert [a.status for a in fenced.list_attempts(key)] == ["failed"] * 3 + ["succeeded"]
    book = assert_balanced(owner)
    assert book["spent"] == _server_billed_micros(fake)  # refusals are not billed


def test_a_refused_key_is_permanent_and_names_the_variable(fake, fenced, owner, clips):
    fake.auth_error = 401
    with pytest.raises(PaidCallRefused, match="GEMINI_API_KEY") as refused:
        _judge(fake, fenced, clips[ON_TOPIC])
    assert KEY not in str(refused.value)
    key = judgement_work_key(DIMENSION, "scene-1", _sha(clips[ON_TOPIC]), SETTINGS.model)
    [attempt] = fenced.list_attempts(key)
    assert attempt.detail["failure_class"] == "permanent" and attempt.detail["scope"] == "key"
    with pytest.raises(PaidCallRefused):  # refused for the key: no other request is sent
        _judge(fake, fenced, clips[OFF_TOPIC])
    other = judgement_work_key(DIMENSION, "scene-1", _sha(clips[OFF_TOPIC]), SETTINGS.model)
    assert fenced.list_attempts(other) == []
    [(text,)] = owner.execute(
        "SELECT text FROM mdame.alerts WHERE cause = 'provider_refused'"
    ).fetchall()
    assert "GEMINI_API_KEY" in text
    assert assert_balanced(owner)["spent"] == 0


def test_an_unknown_model_is_refused_naming_its_setting(fake, fenced, clips):
    settings = RelevanceSettings(model="gemini-nope")
    with pytest.raises(PaidCallRefused, match="set relevance.model in dimensions/tech.yaml"):
        judge_clip(
            clips[ON_TOPIC],
            NARRATION,
            scene_key="scene-1",
            ctx=context(fenced, gemini_prices=(("gemini-nope", 100_000, 400_000),)),
            api_key=KEY,
            settings=settings,
            base_url=fake.base_url,
        )


def test_a_malformed_answer_is_billed_and_counted_unusable(fake, fenced, owner, clips):
    fake.faults.push("schema")  # JSON that breaks the schema, once
    assert _judge(fake, fenced, clips[ON_TOPIC]).passed
    key = judgement_work_key(DIMENSION, "scene-1", _sha(clips[ON_TOPIC]), SETTINGS.model)
    first, second = fenced.list_attempts(key)
    assert (first.status, first.detail["failure_class"]) == ("failed", "unusable")
    assert "invalid answer" in first.detail["error"] and second.status == "succeeded"

    fake.set_field("score", 1.7)  # every answer now out of its range
    judgement = _judge(fake, fenced, clips[ON_TOPIC], scene="scene-2")
    assert judgement.verdict == UNUSABLE and not judgement.passed
    assert "3 billed answers" in judgement.reason and "'score' must be a number" in judgement.reason
    key = judgement_work_key(DIMENSION, "scene-2", _sha(clips[ON_TOPIC]), SETTINGS.model)
    assert [a.detail["failure_class"] for a in fenced.list_attempts(key)] == ["unusable"] * 3
    book = assert_balanced(owner)
    assert book["spent"] == _server_billed_micros(fake)  # each unusable answer billed
    assert fake.request_count == 5


def test_a_blocked_judgement_does_not_pass(fake, fenced, clips):
    fake.faults.push("safety")
    judgement = _judge(fake, fenced, clips[ON_TOPIC])
    assert judgement.verdict == BLOCKED and not judgement.passed
    assert "prompt blocked" in judgement.reason


class Killed(BaseException):
    """Stands for the SIGKILL: nothing after it runs."""


@pytest.fixture
def killed_at() -> Iterator[Any]:
    def install(rpc: str, phase: str) -> None:
        def observer(name: str, when: str) -> None:
            if (name, when) == (rpc, phase):
                set_commit_observer(None)
                raise Killed

        set_commit_observer(observer)

    yield install
    set_commit_observer(None)


def test_a_rerun_after_a_kill_between_reservation_and_answer_sends_once(
    fake, db, owner: psycopg.Connection, clips, killed_at, monkeypatch
):
    monkeypatch.setenv("MDAME_LOCK_TTL_S", "1")
    monkeypatch.setenv("MDAME_GEMINI_GRACE_S", "1")
    killed_at("begin_paid_call", "after")  # reserved, not sent
    with pytest.raises(Killed), held_lock(db, DIMENSION, "killed-holder") as dead:
        _judge(fake, dead, clips[ON_TOPIC])
    assert fake.request_count == 0
    with held_lock(db, DIMENSION, "next-holder") as store:
        try:
            judgement = _judge(fake, store, clips[ON_TOPIC])
        except PaidCallInFlight as waiting:  # the killed call's lease may not have ended yet
            until = waiting.until
            assert until is not None
            wait_for(
                "the killed call's lease to end",
                lambda: owner.execute("SELECT now() > %s", [until]).fetchone()[0],
                timeout=10,
            )
            judgement = _judge(fake, store, clips[ON_TOPIC])
    assert judgement.passed
    assert fake.request_count == 1 and len(fake.counters()["billed"]) == 1
    key = judgement_work_key(DIMENSION, "scene-1", _sha(clips[ON_TOPIC]), SETTINGS.model)
    attempts = [(a.status, "settled_at_estimate" in a.detail) for a in db.list_attempts(key)]
    assert attempts == [("failed", True), ("succeeded", False)]
    assert_balanced(owner)


def test_a_rerun_after_a_kill_once_the_answer_is_recorded_sends_nothing(
    fake, db, owner: psycopg.Connection, clips, killed_at
):
    killed_at("settle_paid_call", "after")  # answered and recorded, not yet used
    with pytest.raises(Killed), held_lock(db, DIMENSION, "killed-holder") as dead:
        _judge(fake, dead, clips[OFF_TOPIC])
    with held_lock(db, DIMENSION, "next-holder") as store:
        judgement = _judge(fake, store, clips[OFF_TOPIC])
    assert not judgement.passed and "nothing the narration" in judgement.reason
    assert fake.request_count == 1
    assert assert_balanced(owner)["spent"] == _server_billed_micros(fake)


def _sha(path: Path) -> str:
    return sha256_file(path)


def test_the_local_server_bills_an_image_per_tile_and_refuses_an_unreadable_one(fake):
    from google.genai import errors, types

    client = make_client(KEY, fake.base_url, 10.0)
    config = types.GenerateContentConfig(
        response_mime_type="application/json",
        response_schema={"type": "OBJECT", "properties": {"score": {"type": "NUMBER"}}},
        max_output_tokens=64,
    )
    text = f"Judge.\nNarration: {NARRATION}"
    for size, tokens in (((144, 256), 258), ((800, 800), 4 * 258)):
        still = types.Part.from_bytes(
            data=imagery.picture_png(ON_TOPIC, *size), mime_type="image/png"
        )
        answer = client.models.generate_content(
            model=SETTINGS.model, contents=[still, text], config=config
        )
        assert json.loads(answer.text or "")["score"] == imagery.ON_TOPIC_SCORE
        assert answer.usage_metadata.prompt_token_count == tokens + math.ceil(len(text) / 4)
    broken = types.Part.from_bytes(data=b"not an image", mime_type="image/jpeg")
    with pytest.raises(errors.ClientError, match="Unable to process input image"):
        client.models.generate_content(model=SETTINGS.model, contents=[broken, text], config=config)
