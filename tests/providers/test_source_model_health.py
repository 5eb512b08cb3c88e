"""The health checks of the trend reader, the safety classifier and the diffusers engine (what
`mdame doctor` prints for them): the trend reader fetches each source the active dimensions
list through its own httpx client from the local feed server (fakes/feeds.py), the safety
classifier asks google-genai's models.get of the local Gemini server, and the diffusers engine
looks at model folders in a temporary model directory. No key is ever shown."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from fakes import feeds as fake_feeds
from fakes import gemini as fake_gemini
from mdame_cli.doctor.context import Doctor, Options
from mdame_cli.doctor.providers import (
    check_diffusers,
    check_gemini,
    check_safety,
    check_trends,
)
from mdame_cli.ui import free_port
from mdame_core.settings import REPO_ROOT
from mdame_domain.dimensions import DimensionConfig, load_dimension_file
from mdame_domain.doctor import Status
from mdame_domain.feed_sources import FeedSource
from mdame_domain.paid_calls import DEFAULT_TEXT_MODEL
from mdame_resources.health import Health, HealthScope
from mdame_resources.providers.safety import GeminiSafetyClassifier
from mdame_resources.providers.trends import HttpFeedTrendSource
from mdame_resources.providers.visuals import DiffusersVisuals, ProceduralVisuals
from mdame_resources.providers.writer import GeminiScriptWriter

YOUTUBE_KEY = "yt-key-not-secret-0123456789"
GEMINI_KEY = "test-key-not-secret-safety-0123456789"
UNKNOWN = "gemini-9.9-imaginary"
ENV_VARS = (
    "YOUTUBE_API_KEY",
    "GEMINI_API_KEY",
    "MDAME_GEMINI_BASE_URL",
    "MDAME_YOUTUBE_ROOT_URL",
    "MDAME_GOOGLE_TRENDS_ROOT_URL",
    "MDAME_REDDIT_ROOT_URL",
    "MDAME_MODEL_DIR",
)


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def feeds() -> Iterator[fake_feeds.FeedServer]:
    with fake_feeds.running(youtube_key=YOUTUBE_KEY) as server:
        yield server


def shown(found: list[Health]) -> list[tuple[str, Status]]:
    for health in found:
        assert "not-secret" not in health.message, f"a secret was shown: {health}"
        assert "not-secret" not in health.subject, f"a secret was shown: {health}"
    return [(h.subject, h.status) for h in found]


def _dimension(slug: str = "tech", **fields: Any) -> DimensionConfig:
    """dimensions/<slug>.yaml with these fields replaced."""
    return dataclasses.replace(
        load_dimension_file(REPO_ROOT / "dimensions" / f"{slug}.yaml"), **fields
    )


def _visuals(dim: DimensionConfig, **visuals: Any) -> DimensionConfig:
    return dataclasses.replace(dim, visuals=dataclasses.replace(dim.visuals, **visuals))


def _reader(feeds: fake_feeds.FeedServer, **fields: Any) -> HttpFeedTrendSource:
    return HttpFeedTrendSource(
        youtube_api_key=dg.EnvVar("YOUTUBE_API_KEY"),
        youtube_root_url=feeds.base_url,
        reddit_root_url=feeds.base_url,
        google_trends_root_url=feeds.base_url,
        **fields,
    )


# -- the trend reader --------------------------------------------------------------------------


def test_trend_check_fetches_each_listed_source_once(
    feeds: fake_feeds.FeedServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    rss = FeedSource("rss", url=f"{feeds.base_url}/feeds/rss.xml")
    youtube = FeedSource("youtube_most_popular", region="US")
    reddit = FeedSource("reddit_top", subreddit="technology")
    tech = _dimension("tech", feeds=(), sources=(rss, youtube))
    science = _dimension("science", feeds=(), sources=(rss, reddit))
    scope = HealthScope(dimensions=[tech, science])
    reader = _reader(feeds)
    rss_key, yt_key, reddit_key = (reader.source_key(s) for s in (rss, youtube, reddit))

    assert reader.health_check(5.0) == [
        Health(Status.SKIP, "no active dimension: no trend source to check")
    ]

    # No key: the YouTube source FAILs naming the variable and is not fetched.
    found = reader.health_check(5.0, scope)
    assert shown(found) == [(rss_key, Status.OK), (yt_key, Status.FAIL), (reddit_key, Status.OK)]
    assert "listed by tech, science" in found[0].message and "answered" in found[0].message
    assert found[1].message.startswith("YOUTUBE_API_KEY is not set (listed by tech)")
    assert feeds.requests_to("/youtube") == []
    # A source two dimensions list is fetched once.
    assert len(feeds.requests_to("/feeds/rss.xml")) == 1

    monkeypatch.setenv("YOUTUBE_API_KEY", YOUTUBE_KEY)
    assert shown(reader.health_check(5.0, scope))[1] == (yt_key, Status.OK)

    # A key YouTube refuses FAILs naming it; a source down WARNs; a wrong URL FAILs.
    monkeypatch.setenv("YOUTUBE_API_KEY", "another-key-not-secret-987")
    feeds.set_fault("reddit", "500")
    closed = FeedSource("rss", url=f"http://127.0.0.1:{free_port()}/feed.xml")
    missing = FeedSource("atom", url=f"{feeds.base_url}/feeds/missing.atom")
    tech = _dimension("tech", feeds=(), sources=(youtube, reddit, closed, missing))
    found = reader.health_check(5.0, HealthScope(dimensions=[tech]))
    assert [status for _, status in shown(found)] == [
        Status.FAIL,
        Status.WARN,
        Status.WARN,
        Status.FAIL,
    ]
    assert "refused YOUTUBE_API_KEY (HTTP 400" in found[0].message
    assert "API key not valid" in found[0].message
    assert "HTTP 500" in found[1].message and "transient" in found[1].message
    assert "ConnectError" in found[2].message and "transient" in found[2].message
    assert "HTTP 404" in found[3].message
    assert "check the source in dimensions/tech.yaml" in found[3].message


def test_trend_check_of_sample_feed_files(feeds: fake_feeds.FeedServer) -> None:
    """Production never reads the sample files: a dimension reading nothing else FAILs; the
    fakes' reader (read_files) reads them."""
    tech = _dimension("tech")  # feeds: [feeds/tech.xml]
    live = FeedSource("rss", url=f"{feeds.base_url}/feeds/rss.xml")
    science = _dimension("science", sources=(live,))  # feeds/science.atom and a live one
    scope = HealthScope(dimensions=[tech, science])
    found = _reader(feeds).health_check(5.0, scope)
    assert [(subject, status) for subject, status in shown(found)] == [
        ("feeds/tech.xml", Status.FAIL),
        ("feeds/science.atom", Status.WARN),
        (live.url, Status.OK),
    ]
    assert "tech read no other source" in found[0].message
    assert "give it live `sources:`" in found[0].message
    assert "remove it from dimensions/science.yaml" in found[1].message

    found = _reader(feeds, read_files=True).health_check(5.0, scope)
    assert [status for _, status in shown(found)] == [Status.OK] * 3
    assert found[0].message.startswith("read ")


# -- the safety classifier ---------------------------------------------------------------------


def test_safety_check_asks_for_each_text_model(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_gemini.running() as gemini:
        key = dg.EnvVar("GEMINI_API_KEY")
        safety = GeminiSafetyClassifier(api_key=key, base_url=gemini.base_url)
        assert safety.health_check(5.0) == [Health(Status.FAIL, "GEMINI_API_KEY is not set")]

        monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
        [ok] = safety.health_check(5.0)
        assert shown([ok]) == [(DEFAULT_TEXT_MODEL, Status.OK)]  # the text model only

        odd = _dimension("tech", gemini_text_model=UNKNOWN)
        [missing] = safety.health_check(5.0, HealthScope(dimensions=[odd]))
        assert shown([missing]) == [(UNKNOWN, Status.FAIL)]
        assert "set gemini_text_model in dimensions/tech.yaml" in missing.message

        # In one doctor run a model the writer's check asked with the same key is not asked
        # again: a key refused since is not seen.
        answers: dict[Any, Any] = {}
        scope = HealthScope(dimensions=[_dimension("tech")], answers=answers)
        writer = GeminiScriptWriter(api_key=key, base_url=gemini.base_url)
        assert all(h.status is Status.OK for h in writer.health_check(5.0, scope))
        gemini.auth_error = 401
        assert shown(safety.health_check(5.0, scope)) == [(DEFAULT_TEXT_MODEL, Status.OK)]
        [refused] = safety.health_check(5.0, HealthScope(dimensions=[_dimension("tech")]))
        assert shown([refused]) == [("", Status.FAIL)]
        assert "refused GEMINI_API_KEY (HTTP 401 UNAUTHENTICATED" in refused.message


# -- the diffusers engine ----------------------------------------------------------------------


def _pipeline(folder: Path, components: dict[str, Any]) -> None:
    folder.mkdir(parents=True)
    index = {"_class_name": "StableDiffusionPipeline", **components}
    (folder / "model_index.json").write_text(json.dumps(index))
    for name, value in components.items():
        if isinstance(value, list) and value[0] is not None:
            (folder / name).mkdir()
            (folder / name / "config.json").write_text("{}")
    (folder / "unet" / "diffusion_pytorch_model.safetensors").write_bytes(b"\0" * 8)


def test_diffusers_check_looks_at_the_model_folders_the_chains_need(tmp_path: Path) -> None:
    visuals = DiffusersVisuals(model_dir=str(tmp_path))
    base, adapter = visuals.models_for("animatediff")
    tech = _visuals(_dimension("tech"), engine="animatediff", chain=("diffusers", "stock"))

    # The sample chains [generated, stock] need no model.
    [skip] = visuals.health_check(5.0, HealthScope(dimensions=[_dimension("tech")]))
    assert skip.status is Status.SKIP and "visuals.chain has diffusers" in skip.message

    found = visuals.health_check(5.0, HealthScope(dimensions=[tech]))
    assert shown(found) == [(base, Status.FAIL), (adapter, Status.FAIL)]
    assert f"{tmp_path / base} is missing" in found[0].message
    assert "needed by tech (visuals.engine animatediff)" in found[0].message
    assert "mdame models pull" in found[0].message

    _pipeline(
        tmp_path / base,
        {"unet": ["diffusers", "UNet2DConditionModel"], "vae": ["diffusers", "AutoencoderKL"],
         "safety_checker": [None, None]},
    )  # fmt: skip
    (tmp_path / adapter).mkdir(parents=True)
    (tmp_path / adapter / "config.json").write_text('{"_class_name": "MotionAdapter"')
    found = visuals.health_check(5.0, HealthScope(dimensions=[tech]))
    assert shown(found) == [(base, Status.OK), (adapter, Status.FAIL)]
    assert "config.json is not readable JSON" in found[1].message

    (tmp_path / adapter / "config.json").write_text('{"_class_name": "MotionAdapter"}')
    [_, no_weights] = visuals.health_check(5.0, HealthScope(dimensions=[tech]))
    assert no_weights.status is Status.FAIL and "has no weights" in no_weights.message
    (tmp_path / adapter / "diffusion_pytorch_model.fp16.safetensors").write_bytes(b"\0" * 8)
    assert [h.status for h in visuals.health_check(5.0, HealthScope(dimensions=[tech]))] == [
        Status.OK,
        Status.OK,
    ]

    (tmp_path / base / "vae" / "config.json").unlink()
    (tmp_path / base / "vae").rmdir()
    [broken, _] = visuals.health_check(5.0, HealthScope(dimensions=[tech]))
    assert broken.status is Status.FAIL
    assert "lacks the component folders its model_index.json names: vae" in broken.message


# -- in the doctor -----------------------------------------------------------------------------


def test_the_doctor_reports_trends_safety_and_diffusers(
    feeds: fake_feeds.FeedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("YOUTUBE_API_KEY", YOUTUBE_KEY)
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    youtube = FeedSource("youtube_most_popular", region="US")
    tech = _visuals(_dimension("tech", sources=(youtube,)), chain=("diffusers",))
    key = dg.EnvVar("GEMINI_API_KEY")
    with fake_gemini.running() as gemini:
        doctor = Doctor(Options(timeout_s=5.0), providers="production", dimensions=[tech])
        doctor.resources = {
            "trend_source": _reader(feeds, read_files=True),
            "writer": GeminiScriptWriter(api_key=key, base_url=gemini.base_url),
            "safety": GeminiSafetyClassifier(api_key=key, base_url=gemini.base_url),
            "visuals": DiffusersVisuals(model_dir=str(tmp_path)),
        }
        check_trends(doctor)
        check_gemini(doctor)
        gemini.auth_error = 401  # the safety check reuses the writer's answer: not asked again
        check_safety(doctor)
        check_diffusers(doctor)
    rows = {c.name: c for c in doctor.checks}
    yt_key = doctor.resources["trend_source"].source_key(youtube)
    models = DiffusersVisuals().models_for(tech.visuals.engine)
    assert {name: c.status for name, c in rows.items()} == {
        "trends:feeds/tech.xml": Status.OK,
        f"trends:{yt_key}": Status.OK,
        f"gemini:{DEFAULT_TEXT_MODEL}": Status.OK,
        f"gemini:{tech.gemini_tts_model}": Status.OK,
        f"safety:{DEFAULT_TEXT_MODEL}": Status.OK,
        **{f"diffusers:{model}": Status.FAIL for model in models},
    }
    assert all("not-secret" not in c.detail for c in doctor.checks)

    # The fakes bind procedural clips for the diffusers engine: nothing to check.
    doctor = Doctor(Options(), providers="fakes", resources={"visuals": ProceduralVisuals()})
    check_diffusers(doctor)
    [row] = doctor.checks
    assert row.status is Status.SKIP
    assert "the fakes providers bind ProceduralVisuals for visuals" in row.detail
