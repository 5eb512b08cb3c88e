"""Each production provider's own health check (what `mdame doctor` prints for it), run on the
resource as the definitions build it: its settings come from the resource (a dg.EnvVar read when
the check runs, as a run reads it), never from variables the doctor reads on its own. The real
clients talk to the local servers of fakes/; nothing leaves 127.0.0.1."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import dagster as dg
import pytest

from fakes import gemini as fake_gemini
from fakes import youtube as fake_youtube
from fakes.edge_tts import running as edge_running
from fakes.telegram import TelegramServer
from mdame_core.settings import REPO_ROOT
from mdame_core.state import StateStore
from mdame_domain.credentials import MasterKey, associated_data, seal_grant, write_key_file
from mdame_domain.dimensions import load_dimension_file
from mdame_domain.doctor import Status
from mdame_domain.paid_calls import DEFAULT_TEXT_MODEL, DEFAULT_TTS_MODEL
from mdame_resources.health import Health, HealthScope
from mdame_resources.notify import TelegramNotifier
from mdame_resources.providers.publisher import YouTubePublisher
from mdame_resources.providers.voice import EdgeGeminiVoiceChain
from mdame_resources.providers.writer import GeminiScriptWriter, LocalScriptWriter
from tests.adminkit import as_admin
from tests.telegramkit import TOKEN as BOT_TOKEN
from tests.telegramkit import telegram_server  # noqa: F401 - a fixture

GEMINI_KEY = "test-key-not-secret-health-0123456789"
REFRESH_TOKEN = "1//rt-health-not-secret-" + "h" * 20
CLIENT_SECRET = "cs-health-not-secret-0123"
# Every provider setting the doctor used to read for itself: none may reach a check here.
PROVIDER_VARS = (
    "GEMINI_API_KEY",
    "MDAME_GEMINI_BASE_URL",
    "MDAME_EDGE_TTS_URL",
    "MDAME_TELEGRAM_API_URL",
    "MDAME_TELEGRAM_BOT_TOKEN",
    "MDAME_TELEGRAM_CHAT_ID",
    "MDAME_YOUTUBE_CLIENT_SECRETS",
    "MDAME_YOUTUBE_ROOT_URL",
    "MDAME_GOOGLE_TOKEN_URI",
    "MDAME_MASTER_KEY",
    "MDAME_MASTER_KEY_FILE",
    "MDAME_MASTER_KEY_PREVIOUS",
)


@pytest.fixture(autouse=True)
def no_provider_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROVIDER_VARS:
        monkeypatch.delenv(name, raising=False)


def shown(found: list[Health]) -> list[tuple[str, Status]]:
    for health in found:
        assert "not-secret" not in health.message, f"a secret was shown: {health}"
    return [(h.subject, h.status) for h in found]


def test_gemini_check_reads_the_key_the_writer_names(monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_gemini.running() as gemini:
        writer = GeminiScriptWriter(api_key=dg.EnvVar("GEMINI_API_KEY"), base_url=gemini.base_url)
        assert writer.health_check(5.0) == [Health(Status.FAIL, "GEMINI_API_KEY is not set")]

        monkeypatch.setenv("GEMINI_API_KEY", GEMINI_KEY)
        found = writer.health_check(5.0)
        assert shown(found) == [(DEFAULT_TEXT_MODEL, Status.OK), (DEFAULT_TTS_MODEL, Status.OK)]
        assert f"offered at {gemini.base_url.rstrip('/')}" in found[0].message

        gemini.auth_error = 401
        [refused] = writer.health_check(5.0)
        assert shown([refused]) == [("", Status.FAIL)]
        assert "refused GEMINI_API_KEY (HTTP 401 UNAUTHENTICATED" in refused.message

    # A key given to the resource itself is named by its field.
    [nothing] = GeminiScriptWriter(api_key="", base_url=gemini.base_url).health_check(5.0)
    assert nothing.message == "GeminiScriptWriter.api_key is not set"


def test_telegram_check_uses_the_notifier_settings(
    telegram_server: TelegramServer,  # noqa: F811 - the fixture
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    notifier = TelegramNotifier(
        bot_token=dg.EnvVar("MDAME_TELEGRAM_BOT_TOKEN"),
        api_url=telegram_server.base_url,
        chat_id="-100123",
    )
    [unset] = notifier.health_check(5.0)
    assert unset.status is Status.FAIL
    assert unset.message.startswith("MDAME_TELEGRAM_BOT_TOKEN is not set")

    monkeypatch.setenv("MDAME_TELEGRAM_BOT_TOKEN", BOT_TOKEN)
    scope = HealthScope(slugs=["tech"])
    [ok] = notifier.health_check(5.0, scope)
    assert shown([ok]) == [("", Status.OK)]
    assert ok.message == f"bot @mdame_local_bot at {telegram_server.base_url}"

    monkeypatch.setenv("MDAME_TELEGRAM_BOT_TOKEN", "654321:wrong-token-not-secret")
    [refused] = notifier.health_check(5.0, scope)
    assert shown([refused]) == [("", Status.FAIL)] and "401 Unauthorized" in refused.message


def test_edge_check_lists_the_voices_at_the_voice_chain_endpoint() -> None:
    tech = load_dimension_file(REPO_ROOT / "dimensions" / "tech.yaml")
    unknown = dataclasses.replace(
        tech, tts=dataclasses.replace(tech.tts, edge_voice="xx-XX-Nobody")
    )
    with edge_running() as edge:
        voice = EdgeGeminiVoiceChain(edge_url=edge.wss_url)
        [ok] = voice.health_check(5.0, HealthScope(dimensions=[tech]))
        assert ok.status is Status.OK and "voices at http://127.0.0.1" in ok.message

        [warn] = voice.health_check(5.0, HealthScope(dimensions=[unknown]))
        assert warn.status is Status.WARN
        assert "but not xx-XX-Nobody (tech): those dimensions would fall back" in warn.message

        edge.set_fault("403")
        [refused] = voice.health_check(5.0)
        assert refused.status is Status.FAIL and "answered HTTP 403" in refused.message

    no_query = EdgeGeminiVoiceChain(edge_url="ws://127.0.0.1:9/edge/v1")
    assert no_query.health_check(5.0) == [
        Health(Status.FAIL, "MDAME_EDGE_TTS_URL must contain '?' (a query string)")
    ]


def test_youtube_check_opens_each_account_as_the_publisher_does(
    state: StateStore, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    admin = as_admin(state)
    admin.upsert_dimension("tech", "Tech")
    admin.upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    [account] = state.list_accounts("tech")
    master = MasterKey.generate()
    write_key_file(tmp_path / "master.key", master)
    envelope = seal_grant(
        master, associated_data("dev", "youtube", "@tech"), {"refresh_token": REFRESH_TOKEN}
    )
    admin.store_account_credential(
        account.id, envelope.key_id, envelope.wrapped_key, envelope.ciphertext
    )
    with fake_youtube.running(tmp_path / "youtube") as yt:
        yt.add_channel("@tech", REFRESH_TOKEN)
        client = tmp_path / "client.json"
        app = {"client_id": "cid.health", "client_secret": CLIENT_SECRET}
        client.write_text(json.dumps({"installed": {**app, "token_uri": yt.token_uri}}))
        publisher = YouTubePublisher(
            client_secrets_file=dg.EnvVar("MDAME_YOUTUBE_CLIENT_SECRETS"),
            root_url=yt.base_url,
            token_uri=yt.token_uri,
            master_key_file=str(tmp_path / "master.key"),
        )
        scope = HealthScope(slugs=["tech"], state=state)
        [unset] = publisher.health_check(5.0, scope)
        assert unset == Health(Status.FAIL, "MDAME_YOUTUBE_CLIENT_SECRETS is not set", "tech/@tech")

        monkeypatch.setenv("MDAME_YOUTUBE_CLIENT_SECRETS", str(client))
        [ok] = publisher.health_check(5.0, scope)
        assert shown([ok]) == [("tech/@tech", Status.OK)]
        assert "token refreshed; channels.list answers" in ok.message

        yt.faults.push("invalid_grant")
        [revoked] = publisher.health_check(5.0, scope)
        assert shown([revoked]) == [("tech/@tech", Status.FAIL)]
        assert "token refresh refused (invalid_grant)" in revoked.message

    assert publisher.health_check(5.0, HealthScope(slugs=[], state=state)) == [
        Health(Status.FAIL, "no active YouTube account in the database")
    ]


def test_an_offline_provider_has_no_health_check() -> None:
    with pytest.raises(NotImplementedError, match="LocalScriptWriter has no health check"):
        LocalScriptWriter().health_check(5.0)
