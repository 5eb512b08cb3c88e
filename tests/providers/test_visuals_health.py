"""The health checks of the visuals chain's engines (what `mdame doctor` prints for them): the
generated engine's image models and the relevance judge's models through google-genai's
models.get against the local Gemini server, the stock sources through the engine's own httpx
client against the local Pexels and Pixabay servers. A good key is OK, a refused key names its
variable, an unknown model names itself and the dimension's setting; no key is ever shown."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from fakes import gemini as fake_gemini
from fakes import pexels, pixabay
from fakes.pexels import FakePexels
from fakes.pixabay import FakePixabay
from fakes.stock_common import environ_for
from mdame_cli.doctor.context import Doctor, Options
from mdame_cli.doctor.providers import check_generated, check_relevance, check_stock
from mdame_core.settings import REPO_ROOT
from mdame_domain.dimensions import DimensionConfig, load_dimension_file
from mdame_domain.doctor import Status
from mdame_domain.generated_stills import DEFAULT_IMAGE_MODEL, GeneratedSettings
from mdame_domain.relevance import RelevanceSettings
from mdame_resources.health import Health, HealthScope
from mdame_resources.providers.generated_visuals import GeneratedVisuals
from mdame_resources.providers.relevance import GeminiRelevanceJudge
from mdame_resources.providers.stock import StockFootage

GEMINI_KEY = "test-key-not-secret-visuals-0123456789"
PEXELS_KEY = "pexels-not-secret-0123456789"
PIXABAY_KEY = "pixabay-not-secret-0123456789"
UNKNOWN = "gemini-9.9-imaginary"
STOCK_VARS = (
    "MDAME_PEXELS_API_KEY",
    "MDAME_PIXABAY_API_KEY",
    "MDAME_PEXELS_URL",
    "MDAME_PIXABAY_URL",
)


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("GEMINI_API_KEY", "MDAME_GEMINI_BASE_URL", *STOCK_VARS):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def px(tmp_path: Path) -> Iterator[FakePexels]:
    with pexels.running(tmp_path / "pexels") as server:
        yield server


@pytest.fixture
def pb(tmp_path: Path) -> Iterator[FakePixabay]:
    with pixabay.running(tmp_path / "pixabay") as server:
        yield server


def shown(found: list[Health]) -> list[tuple[str, Status]]:
    for health in found:
        assert "not-secret" not in health.message, f"a secret was shown: {health}"
    return [(h.subject, h.status) for h in found]


def _tech(**visuals: object) -> DimensionConfig:
    """dimensions/tech.yaml with these visuals settings."""
    tech = load_dimension_file(REPO_ROOT / "dimensions" / "tech.yaml")
    return dataclasses.replace(tech, visuals=dataclasses.replace(tech.visuals, **visuals))


def test_generated_check_asks_for_each_image_model_the_chains_use(
    fake: fake_gemini.FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    engine = GeneratedVisuals(api_key=dg.EnvVar("GEMINI_API_KEY"), base_url=fake.base_url)
    assert engine.health_check(5.0) == [Health(Status.FAIL, "GEMINI_API_KEY is not set")]
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)

    [ok] = engine.health_check(5.0)
    assert shown([ok]) == [(DEFAULT_IMAGE_MODEL, Status.OK)]
    assert "the default visuals.generated.model (no active dimension)" in ok.message

    # A dimension's own model, unknown to the API: the provider's words and the YAML to fix.
    tech = _tech(generated=GeneratedSettings(UNKNOWN, usd_per_image=0.05))
    [missing] = engine.health_check(5.0, HealthScope(dimensions=[tech]))
    assert shown([missing]) == [(UNKNOWN, Status.FAIL)]
    assert "HTTP 404 NOT_FOUND" in missing.message
    assert "set visuals.generated.model in dimensions/tech.yaml" in missing.message

    # An image model the API offers but nobody priced: the engine would refuse to call it.
    fake.models.append(UNKNOWN)
    unpriced = _tech(generated=GeneratedSettings(UNKNOWN))
    found = engine.health_check(5.0, HealthScope(dimensions=[unpriced]))
    assert shown(found) == [(UNKNOWN, Status.OK), (UNKNOWN, Status.FAIL)]
    assert "used by tech (visuals.generated.model)" in found[0].message
    assert "set generated.usd_per_image" in found[1].message

    # A chain without the engine needs nothing of it.
    [skip] = engine.health_check(5.0, HealthScope(dimensions=[_tech(chain=("stock",))]))
    assert skip.status is Status.SKIP and "visuals.chain has generated" in skip.message

    fake.auth_error = 401
    [refused] = engine.health_check(5.0, HealthScope(dimensions=[tech]))
    assert shown([refused]) == [("", Status.FAIL)]
    assert "refused GEMINI_API_KEY (HTTP 401 UNAUTHENTICATED" in refused.message


def test_relevance_check_asks_for_each_judge_model(
    fake: fake_gemini.FakeGemini, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    judge = GeminiRelevanceJudge(api_key=dg.EnvVar("GEMINI_API_KEY"), base_url=fake.base_url)
    tech = _tech()
    [ok] = judge.health_check(5.0, HealthScope(dimensions=[tech]))
    assert shown([ok]) == [(RelevanceSettings().model, Status.OK)]
    assert "used by tech (visuals.relevance.model)" in ok.message

    odd = _tech(relevance=RelevanceSettings(model=UNKNOWN))
    found = judge.health_check(5.0, HealthScope(dimensions=[odd]))
    assert shown(found) == [(UNKNOWN, Status.FAIL)]
    assert "set visuals.relevance.model in dimensions/tech.yaml" in found[0].message

    # Procedural clips are never judged.
    [skip] = judge.health_check(5.0, HealthScope(dimensions=[_tech(chain=("procedural",))]))
    assert skip.status is Status.SKIP

    fake.auth_error = 403
    [refused] = judge.health_check(5.0)
    assert shown([refused]) == [("", Status.FAIL)] and "refused GEMINI_API_KEY" in refused.message


def test_stock_check_searches_each_source_with_a_key(
    px: FakePexels, pb: FakePixabay, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in environ_for(px, pb).items():
        monkeypatch.setenv(name, value)
    stock = StockFootage()
    tech = HealthScope(dimensions=[_tech(chain=("generated", "stock"))])

    # No key: not configured, a warning only where a chain has stock.
    assert shown(stock.health_check(5.0)) == [("pexels", Status.SKIP), ("pixabay", Status.SKIP)]
    found = stock.health_check(5.0, tech)
    assert shown(found) == [("pexels", Status.WARN), ("pixabay", Status.WARN)]
    assert "MDAME_PEXELS_API_KEY is not set (tech use stock" in found[0].message

    monkeypatch.setenv("MDAME_PEXELS_API_KEY", PEXELS_KEY)
    monkeypatch.setenv("MDAME_PIXABAY_API_KEY", PIXABAY_KEY)
    found = stock.health_check(5.0, tech)
    assert shown(found) == [("pexels", Status.OK), ("pixabay", Status.OK)]
    assert f"a search at {px.base_url.rstrip('/')}/videos/search answered" in found[0].message
    # One small search each, never more.
    assert [r["query"] for r in px.requests()] == ["city"]
    assert [r["query"] for r in pb.requests()] == ["city"]

    px.faults.push("bad_key")
    pb.keys = {"another-key-0123456789"}
    found = stock.health_check(5.0, tech)
    assert shown(found) == [("pexels", Status.FAIL), ("pixabay", Status.FAIL)]
    assert "Pexels refused the API key (HTTP 401" in found[0].message
    assert "set MDAME_PEXELS_API_KEY to a valid Pexels API key" in found[0].message
    assert "set MDAME_PIXABAY_API_KEY to a valid Pixabay API key" in found[1].message

    px.faults.push("rate_limited", reset=120)
    [waiting, _] = stock.health_check(5.0, tech)
    assert waiting.status is Status.WARN and "Pexels is rate-limited until" in waiting.message


def test_the_doctor_reports_each_engine_it_binds(
    fake: fake_gemini.FakeGemini, px: FakePexels, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
    monkeypatch.setenv("MDAME_PEXELS_API_KEY", PEXELS_KEY)
    monkeypatch.setenv("MDAME_PEXELS_URL", px.base_url)
    doctor = Doctor(Options(timeout_s=5.0), providers="fakes", dimensions=[_tech()])
    key = dg.EnvVar("GEMINI_API_KEY")
    doctor.resources = {
        "generated_visuals": GeneratedVisuals(api_key=key, base_url=fake.base_url),
        "relevance_judge": GeminiRelevanceJudge(api_key=key, base_url=fake.base_url),
        "stock_footage": StockFootage(),
    }
    fake.models.remove(DEFAULT_IMAGE_MODEL)
    for check in (check_generated, check_relevance, check_stock):
        check(doctor)
    rows = {c.name: c for c in doctor.checks}
    assert {name: c.status for name, c in rows.items()} == {
        f"generated:{DEFAULT_IMAGE_MODEL}": Status.FAIL,
        f"relevance:{RelevanceSettings().model}": Status.OK,
        "stock:pexels": Status.OK,
        "stock:pixabay": Status.WARN,
    }
    assert (
        "visuals.generated.model in dimensions/tech.yaml"
        in rows[f"generated:{DEFAULT_IMAGE_MODEL}"].detail
    )
    assert all("not-secret" not in c.detail for c in doctor.checks)

    # A provider set that binds no such resource says so.
    doctor = Doctor(Options(timeout_s=5.0), providers="fakes", resources={})
    check_stock(doctor)
    [row] = doctor.checks
    assert (row.status, row.detail) == (Status.SKIP, "the fakes providers bind no stock_footage")
