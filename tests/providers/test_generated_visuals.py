"""The `generated` visuals engine against the local Gemini server, with the real google-genai
SDK: a still from the image model (a PNG of the prompt's subject, fakes/imagery) moved into a
clip of the media profile's size; every call reserved and settled at the price per image, so
the ledger is the server's bill; 429, 5xx, an outage and a dropped answer heal; a refused key
and an unknown model are permanent with the server's words and the fix; and a rerun after a
kill never pays for a still twice."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fakes import gemini as fake_gemini
from fakes import imagery
from mdame_core.state import StateStore, set_commit_observer
from mdame_domain.generated_stills import (
    IMAGE_PRICES_MICROS,
    GeneratedSettings,
    still_work_key,
)
from mdame_domain.media_profile import media_profile
from mdame_domain.media_store import LocalMediaStore
from mdame_domain.paid_calls import UnknownPrice
from mdame_domain.waits import NotYet
from mdame_pipeline.locks import held_lock
from mdame_resources.providers.gemini import (
    PaidCallInFlight,
    PaidCallRefused,
    PaidCallTransient,
    PaidCallUnknown,
    make_client,
)
from mdame_resources.providers.generated_visuals import GeneratedVisuals, generate_still
from tests.liveness.liveness_kit import wait_for
from tests.providers.gemkit import DIMENSION, KEY, assert_balanced, context

PROMPT = "Close-up shot showing telescope, cinematic, warm light"
NARRATION = "The telescope spotted a comet low over the horizon"
SCENE = "a1" * 32  # a scene hash
SECONDS = 1.5
PRICE = IMAGE_PRICES_MICROS["gemini-2.5-flash-image"]


@pytest.fixture(autouse=True)
def quick_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MDAME_GEMINI_BACKOFF_S", "0.01")


@pytest.fixture
def media(tmp_path: Path) -> LocalMediaStore:
    return LocalMediaStore(tmp_path / "media")


def _visuals(fake: fake_gemini.FakeGemini, **fields: Any) -> GeneratedVisuals:
    return GeneratedVisuals(api_key=KEY, base_url=fake.base_url, timeout_s=10.0, **fields)


def _clip(fake, store: StateStore, media, out: Path, scene: str = SCENE, **kwargs: Any):
    return _visuals(fake).generate_clip(
        scene, PROMPT, SECONDS, out, ctx=context(store), store=media, **kwargs
    )


def _still(fake, store: StateStore, media, scene_key: str = SCENE, **kwargs: Any):
    return generate_still(
        PROMPT,
        ctx=context(store),
        store=media,
        scene_key=scene_key,
        api_key=KEY,
        base_url=fake.base_url,
        timeout_s=10.0,
        **kwargs,
    )


def _images_billed(fake: fake_gemini.FakeGemini) -> int:
    """The images the server drew and billed (an image's tokens in its usage)."""
    return sum(
        1
        for b in fake.counters()["billed"]
        if any(d["modality"] == "IMAGE" for d in b["usage"].get("candidatesTokensDetails", []))
    )


def _probe(clip: Path) -> dict[str, Any]:
    out = subprocess.run(
        ["ffprobe", "-v", "error", "-count_frames", "-show_streams", "-of", "json", str(clip)],
        capture_output=True,
        check=True,
    ).stdout
    return json.loads(out)


def _middle_frame(clip: Path) -> bytes:
    return subprocess.run(
        ["ffmpeg", "-v", "error", "-ss", f"{SECONDS / 2}", "-i", str(clip), "-frames:v", "1",
         "-f", "image2pipe", "-vcodec", "png", "-"],
        capture_output=True, check=True,
    ).stdout  # fmt: skip


def test_a_clip_of_the_scene_from_a_generated_still_paid_once(fake, fenced, owner, media, tmp_path):
    made = _clip(fake, fenced, media, tmp_path / "clip.mp4")
    profile = media_profile()
    [stream] = _probe(made.path)["streams"]  # video only: no audio
    assert (stream["codec_name"], stream["pix_fmt"]) == ("h264", "yuv420p")
    assert (stream["width"], stream["height"]) == (profile.clip_width, profile.clip_height)
    assert int(stream["nb_read_frames"]) == SECONDS * 24
    # What went out: the image modality at 9:16; what came back: a 288x512 PNG, kept.
    [seen] = fake.requests
    assert (seen.model, seen.kind) == ("gemini-2.5-flash-image", "image")
    config = seen.body["generationConfig"]
    assert config["responseModalities"] == ["IMAGE"] and config["imageConfig"] == {
        "aspectRatio": "9:16"
    }
    assert (made.still.mime, made.still.width, made.still.height) == ("image/png", 288, 512)
    assert media.problem(made.still.uri, made.still.sha256) is None
    # The clip shows the prompt's subject (the judge the relevance gate will ask).
    assert imagery.judge([_middle_frame(made.path)], NARRATION)[0] == imagery.ON_TOPIC_SCORE
    assert made.still.spent_micros == PRICE and not made.still.cached
    assert assert_balanced(owner)["spent"] == PRICE * _images_billed(fake) == PRICE

    # The scene again (a rerun): the still paid for is read back, nothing is sent or paid.
    again = _clip(fake, fenced, media, tmp_path / "again.mp4")
    assert again.still.cached and again.still.spent_micros == 0 and fake.request_count == 1
    assert again.still.uri == made.still.uri and again.motion == made.motion
    # The next candidate (the gate rejected the first) is a call of its own.
    other = _clip(fake, fenced, media, tmp_path / "next.mp4", candidate=1)
    assert other.still.spent_micros == PRICE and fake.request_count == 2


def test_the_ledger_is_the_servers_bill_through_faults(fake, fenced, owner, media):
    fake.faults.push("503")
    fake.faults.push("schema")  # billed: a text part where the image was asked for
    fake.faults.push("429", retry_after=0)
    fake.faults.push("500")
    for scene in ("s1", "s2", "s3"):
        _still(fake, fenced, media, scene_key=scene)
    statuses = fake.counters()["by_status"]
    assert statuses == {"200": 4, "503": 1, "429": 1, "500": 1}
    book = assert_balanced(owner)
    assert book["held"] == 0 and book["spent"] == PRICE * _images_billed(fake) == 3 * PRICE
    # Every fault fell on the first still's tries: the text answer was billed at no image and
    # recorded unusable, the refusals released, and the fifth try drew it.
    attempts = fenced.list_attempts(still_work_key(DIMENSION, "s1", GeneratedSettings()))
    assert [a.detail.get("failure_class") for a in attempts] == [
        "transient", "unusable", "transient", "transient", None
    ]  # fmt: skip
    assert "carries no image" in str(attempts[1].detail["error"])
    assert attempts[1].detail["images"] == 0 and attempts[-1].status == "succeeded"


def test_a_429_then_an_outage_past_the_run_heal_with_no_operator(
    fake, fenced, owner, media, monkeypatch
):
    fake.faults.push("429", retry_after=1)
    waited = _still(fake, fenced, media, scene_key="s1")
    assert waited.spent_micros == PRICE and fake.request_count == 2
    attempts = fenced.list_attempts(waited.work_key)
    assert [(a.status, a.detail.get("code")) for a in attempts] == [
        ("failed", 429),
        ("succeeded", None),
    ]
    monkeypatch.setenv("MDAME_GEMINI_TRANSIENT_TRIES", "2")
    fake.outage = 503
    with pytest.raises(PaidCallTransient, match="HTTP 503 UNAVAILABLE from gemini-2.5-flash-image"):
        _still(fake, fenced, media, scene_key="s2")
    fake.clear_faults()  # the outage ends; the next run makes the still
    assert _still(fake, fenced, media, scene_key="s2").spent_micros == PRICE
    book = assert_balanced(owner)
    assert book["spent"] == 2 * PRICE == PRICE * _images_billed(fake)


def test_a_dropped_answer_is_settled_at_the_price_then_asked_again(
    fake, fenced, owner, media, monkeypatch
):
    monkeypatch.setenv("MDAME_GEMINI_TRANSIENT_TRIES", "1")
    fake.faults.push("drop")
    with pytest.raises(PaidCallUnknown, match="no answer"):
        _still(fake, fenced, media)
    assert assert_balanced(owner)["held"] == PRICE  # it may have been drawn and billed
    still = _still(fake, fenced, media)
    attempts = fenced.list_attempts(still.work_key)
    assert [(a.status, a.detail.get("settled_at_estimate")) for a in attempts] == [
        ("failed", PRICE),
        ("succeeded", None),
    ]
    assert assert_balanced(owner)["spent"] == 2 * PRICE


def test_an_unknown_model_is_permanent_with_the_servers_words_and_the_fix(
    fake, fenced, owner, media
):
    settings = GeneratedSettings(model="gemini-9-image", usd_per_image=0.05)
    with pytest.raises(PaidCallRefused) as refused:
        _still(fake, fenced, media, settings=settings)
    message = str(refused.value)
    assert "HTTP 404 NOT_FOUND from gemini-9-image: models/gemini-9-image is not found" in message
    assert f"set generated.model in dimensions/{DIMENSION}.yaml to a model it serves" in message
    [(text,)] = owner.execute(
        "SELECT text FROM mdame.alerts WHERE cause = 'provider_refused'"
    ).fetchall()
    assert "gemini-9-image is not found" in text and "generated.model" in text
    # Later runs are refused without a request, until the operator re-arms the calls.
    with pytest.raises(PaidCallRefused, match="refused for good"):
        _still(fake, fenced, media, settings=settings, scene_key="another scene")
    assert fake.request_count == 1
    # A model with no price is refused before anything is sent.
    with pytest.raises(UnknownPrice, match="generated.usd_per_image"):
        _still(fake, fenced, media, settings=GeneratedSettings(model="gemini-8-image"))
    assert fake.request_count == 1


def test_a_refused_key_is_permanent_and_names_the_variable(fake, fenced, owner, media):
    fake.auth_error = 401
    with pytest.raises(PaidCallRefused, match="set GEMINI_API_KEY to a valid Gemini API key") as no:
        _still(fake, fenced, media)
    assert KEY not in str(no.value)
    [(text,)] = owner.execute(
        "SELECT text FROM mdame.alerts WHERE cause = 'provider_refused'"
    ).fetchall()
    assert "GEMINI_API_KEY" in text and KEY not in text
    assert assert_balanced(owner)["spent"] == 0


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


def test_a_kill_between_reservation_and_answer_is_settled_once_and_sent_once(
    fake, db, owner: psycopg.Connection, media, tmp_path, killed_at, monkeypatch
):
    monkeypatch.setenv("MDAME_LOCK_TTL_S", "1")
    monkeypatch.setenv("MDAME_GEMINI_GRACE_S", "1")
    killed_at("begin_paid_call", "after")  # reserved, not sent
    with pytest.raises(Killed), held_lock(db, DIMENSION, "killed-holder") as dead:
        _clip(fake, dead, media, tmp_path / "clip.mp4")
    assert fake.request_count == 0
    with held_lock(db, DIMENSION, "next-holder") as store:
        try:
            made = _clip(fake, store, media, tmp_path / "clip.mp4")
        except PaidCallInFlight as waiting:  # the killed call's lease may not have ended yet
            assert isinstance(waiting, NotYet) and waiting.until is not None
            until = waiting.until
            wait_for(
                "the killed call's lease to end",
                lambda: owner.execute("SELECT now() > %s", [until]).fetchone()[0],
                timeout=10,
            )
            made = _clip(fake, store, media, tmp_path / "clip.mp4")
    assert fake.request_count == 1 and made.path.stat().st_size > 0
    attempts = [(a.status, a.detail.get("settled_at_estimate")) for a in db.list_attempts(
        made.still.work_key
    )]  # fmt: skip
    # The killed call is settled once, at its price (its outcome cannot be looked up).
    assert attempts == [("failed", PRICE), ("succeeded", None)]
    book = assert_balanced(owner)
    assert book["held"] == 0 and book["spent"] == 2 * PRICE


def test_a_kill_after_the_still_is_paid_pays_nothing_on_the_rerun(
    fake, db, owner: psycopg.Connection, media, tmp_path, killed_at
):
    killed_at("settle_paid_call", "after")  # answered and recorded, the clip not made yet
    with pytest.raises(Killed), held_lock(db, DIMENSION, "killed-holder") as dead:
        _clip(fake, dead, media, tmp_path / "clip.mp4")
    assert not (tmp_path / "clip.mp4").exists()
    with held_lock(db, DIMENSION, "next-holder") as store:
        made = _clip(fake, store, media, tmp_path / "clip.mp4")
    assert made.still.cached and fake.request_count == 1
    assert assert_balanced(owner)["spent"] == PRICE * _images_billed(fake) == PRICE


def test_a_kept_still_the_store_lost_is_asked_again_once(fake, fenced, owner, media, tmp_path):
    first = _still(fake, fenced, media)
    assert media.delete(first.uri)
    again = _still(fake, fenced, media)
    assert not again.cached and again.work_key != first.work_key and fake.request_count == 2
    assert media.problem(again.uri, again.sha256) is None
    assert assert_balanced(owner)["spent"] == 2 * PRICE
    assert _still(fake, fenced, media).cached and fake.request_count == 2  # and it is kept


def test_an_off_topic_picture_fails_the_judge_and_the_next_candidate_does_not(
    fake, fenced, media, tmp_path
):
    fake.faults.push("off_topic")
    first = _clip(fake, fenced, media, tmp_path / "first.mp4")
    assert imagery.judge([_middle_frame(first.path)], NARRATION)[0] == imagery.OFF_TOPIC_SCORE
    second = _clip(fake, fenced, media, tmp_path / "second.mp4", candidate=1)
    assert imagery.judge([_middle_frame(second.path)], NARRATION)[0] == imagery.ON_TOPIC_SCORE


def test_the_cache_key_names_the_model_the_shape_and_the_clip_size():
    visuals = GeneratedVisuals(api_key=KEY)
    profile = media_profile()
    size = f"{profile.clip_width}x{profile.clip_height}@24"
    assert visuals.cache_key() == f"generated:gemini-2.5-flash-image:9:16:{size}"
    other = GeneratedSettings(model="gemini-3-pro-image", usd_per_image=0.13)
    assert visuals.cache_key(settings=other) == f"generated:gemini-3-pro-image:9:16:{size}"


def test_the_local_image_model_draws_each_aspect_ratio_and_refuses_others(fake):
    from google.genai import errors, types

    client = make_client(KEY, fake.base_url, 10.0)
    for ratio, size in (("16:9", (512, 288)), ("1:1", (512, 512)), ("21:9", (512, 220))):
        config = types.GenerateContentConfig(
            response_modalities=["IMAGE"], image_config=types.ImageConfig(aspect_ratio=ratio)
        )
        answer = client.models.generate_content(
            model="gemini-2.5-flash-image", contents=PROMPT, config=config
        )
        [part] = answer.candidates[0].content.parts
        png = part.inline_data.data
        width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
        assert part.inline_data.mime_type == "image/png" and (width, height) == size
        assert answer.usage_metadata.candidates_token_count == fake_gemini.IMAGE_OUTPUT_TOKENS
    bad = types.GenerateContentConfig(
        response_modalities=["IMAGE"], image_config=types.ImageConfig(aspect_ratio="5:4")
    )
    with pytest.raises(errors.ClientError, match="Invalid aspect ratio"):
        client.models.generate_content(model="gemini-2.5-flash-image", contents=PROMPT, config=bad)
    # One prompt in N drawn off topic on its first request, as asked on the next.
    fake.off_topic_every = 1
    config = types.GenerateContentConfig(response_modalities=["IMAGE"])
    drawn = [
        client.models.generate_content(
            model="gemini-2.5-flash-image", contents=NARRATION, config=config
        )
        .candidates[0]
        .content.parts[0]
        .inline_data.data
        for _ in range(2)
    ]
    assert [imagery.judge([png], NARRATION)[0] for png in drawn] == [
        imagery.OFF_TOPIC_SCORE,
        imagery.ON_TOPIC_SCORE,
    ]
