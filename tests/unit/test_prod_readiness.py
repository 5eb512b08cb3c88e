"""ENV=prod with the repository's sample feed files (or non-production providers) is refused up
front with a message that says prod needs live sources and the production providers; so is an
endpoint setting that is not https (plain http to a loopback address is dev's, for fakes/)."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace

import pytest

from mdame_core.settings import REPO_ROOT
from mdame_domain.dimensions import load_registry
from mdame_domain.doctor import Status
from mdame_domain.feed_sources import FeedSource
from mdame_domain.prod_readiness import ENDPOINT_VARS, endpoint_problems, prod_problems

DIMENSIONS = load_registry(REPO_ROOT / "dimensions").dimensions


def test_sample_feed_files_and_fake_providers_are_named() -> None:
    problems = prod_problems(DIMENSIONS, "fakes")
    assert problems[0].startswith("MDAME_PROVIDERS=fakes")
    cooking = [p for p in problems if "'cooking'" in p]
    assert cooking and "feeds/cooking.json" in cooking[0] and "sources:" in cooking[0]


def test_live_sources_and_production_providers_pass() -> None:
    trends = FeedSource("google_trends", region="US")
    live = [replace(d, sources=(trends,)) for d in DIMENSIONS]  # files beside a live source
    assert prod_problems(live, "production") == []
    assert prod_problems([replace(d, active=False) for d in DIMENSIONS], "production") == []


def test_mdame_demo_with_env_prod_says_why_in_one_line(tmp_path) -> None:
    env = {**os.environ, "ENV": "prod", "MDAME_HOME": str(tmp_path), "PYTHONPATH": str(REPO_ROOT)}
    env.pop("MDAME_PROVIDERS", None)
    env["MDAME_TIKTOK_BASE_URL"] = "http://127.0.0.1:9/"
    done = subprocess.run(
        [sys.executable, "-m", "mdame_cli.main", "demo"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "ENV=prod needs live trend sources and the production providers" in lines[0]
    assert "feeds/cooking.json" in lines[0] and "unknown url type" not in lines[0]
    assert (
        "MDAME_TIKTOK_BASE_URL='http://127.0.0.1:9/': ENV=prod sends only to https://" in lines[0]
    )


# -- endpoints ---------------------------------------------------------------------------------

LOCAL = "http://127.0.0.1:8765/"


@pytest.mark.parametrize("name", sorted(ENDPOINT_VARS))
def test_a_plain_http_endpoint_is_refused_with_env_prod_naming_it(name: str) -> None:
    scheme = ENDPOINT_VARS[name]
    [problem] = endpoint_problems({name: LOCAL}, "prod")
    assert problem.startswith(f"{name}='{LOCAL}': ENV=prod sends only to {scheme}:// URLs")
    assert endpoint_problems({name: LOCAL}, "dev") == []  # the local servers in fakes/
    assert endpoint_problems({name: f"{scheme}://api.example.com/v1"}, "prod") == []
    assert endpoint_problems({name: ""}, "prod") == []  # unset: the provider's own endpoint


def test_an_endpoint_is_named_without_its_credentials() -> None:
    environ = {
        "MDAME_TELEGRAM_API_URL": "HTTP://api.telegram.org",
        "MDAME_GEMINI_BASE_URL": "http://gw.internal/v1?key=AIzaSECRET",
        "MDAME_EDGE_TTS_URL": "https://speech.example/edge/v1",  # a socket: wss://
        "MDAME_YOUTUBE_ROOT_URL": "youtube.googleapis.com",  # no scheme at all
    }
    problems = endpoint_problems(environ, "prod")
    assert [p.split("=", 1)[0] for p in problems] == [
        "MDAME_YOUTUBE_ROOT_URL",
        "MDAME_GEMINI_BASE_URL",
        "MDAME_EDGE_TTS_URL",
        "MDAME_TELEGRAM_API_URL",
    ]
    assert "AIzaSECRET" not in " ".join(problems) and "key=[redacted]" in problems[1]
    assert endpoint_problems({"MDAME_TIKTOK_BASE_URL": "HTTPS://open.tiktokapis.com"}, "prod") == []


def test_the_definitions_and_the_doctor_refuse_a_plain_http_endpoint_in_prod(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mdame_cli.doctor import run_doctor
    from mdame_cli.doctor.context import Options
    from mdame_core.settings import SettingsError
    from mdame_resources.providers.selection import providers_for_environment

    monkeypatch.setenv("ENV", "prod")
    monkeypatch.setenv("MDAME_PROVIDERS", "production")
    for name in ENDPOINT_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MDAME_INSTAGRAM_GRAPH_URL", LOCAL)
    with pytest.raises(SettingsError, match=f"MDAME_INSTAGRAM_GRAPH_URL='{LOCAL}': ENV=prod"):
        providers_for_environment()
    [check] = run_doctor(Options(only=frozenset({"env"})))
    assert check.status is Status.FAIL
    assert f"MDAME_INSTAGRAM_GRAPH_URL='{LOCAL}': ENV=prod sends only to https://" in check.detail
    monkeypatch.setenv("MDAME_INSTAGRAM_GRAPH_URL", "https://graph.instagram.com")
    assert providers_for_environment()["instagram_publisher"] is not None
    [check] = run_doctor(Options(only=frozenset({"env"})))
    assert check.status is Status.OK
    monkeypatch.setenv("ENV", "dev")  # the local servers are dev's
    monkeypatch.setenv("MDAME_INSTAGRAM_GRAPH_URL", LOCAL)
    assert providers_for_environment()["instagram_publisher"] is not None


def test_an_api_url_that_carries_a_token_is_plain_http_only_in_dev(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The publishers' check of every URL a token goes to (a TikTok upload_url included, which
    the API hands out): with ENV=prod https only, and the refusal never quotes the query."""
    from mdame_core.settings import SettingsError
    from mdame_resources.providers.http_api import trusted

    url = "http://127.0.0.1:9/upload/?upload_id=1&upload_token=UPL0AD-T0KEN"
    monkeypatch.setenv("ENV", "dev")
    assert trusted(url, "TikTok upload_url") == url
    monkeypatch.setenv("ENV", "prod")
    with pytest.raises(SettingsError) as refused:
        trusted(url, "TikTok upload_url")
    assert "'http://127.0.0.1:9/upload/' must be an https URL" in str(refused.value)
    assert "UPL0AD-T0KEN" not in str(refused.value)
    secure = "https://open-upload.tiktokapis.com/upload/?upload_token=t"
    assert trusted(secure, "TikTok upload_url") == secure
