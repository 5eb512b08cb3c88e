"""`make demo PROVIDERS=fakes`: the whole graph with the production providers (Gemini writer,
critic and safety; Edge-TTS then Gemini TTS; the httpx trend reader; the YouTube publisher)
against this package's local protocol servers, end to end. Only the visuals stay procedural (no
GPU). Nothing leaves 127.0.0.1, and no key here is a secret.

It starts the servers, points the providers at them through the same MDAME_* variables a
deployment sets, stores an encrypted grant for each demo account on the fake channel (as
`mdame accounts connect` would after a consent), and then runs the ordinary demo.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from fakes import edge_tts, feeds, gemini, telegram, youtube
from mdame_core.settings import mdame_env, mdame_home
from mdame_core.state import StateStore

# Keys the local servers accept; stand-ins, never real credentials.
DEMO_TELEGRAM_CHAT = "-1000000000001"  # the fake accepts any chat
DEMO_GEMINI_KEY = "fakes-demo-gemini-key"
DEMO_YOUTUBE_KEY = "fakes-demo-youtube-key"


def _client_secrets(folder: Path) -> Path:
    path = folder / "client_secrets.json"
    installed = {"client_id": "fakes-demo.apps.local", "client_secret": "fakes-demo"}
    path.write_text(json.dumps({"installed": installed}), encoding="utf-8")
    return path


def connect_demo_accounts(channel: youtube.FakeYouTube, state: StateStore) -> None:
    """Every active demo account gets a channel on the fake and an encrypted grant."""
    from mdame_assets.defs.dimensions.registry import sync_registry

    report = sync_registry(state)
    accounts = [a for slug in report.active for a in state.list_accounts(slug) if a.active]
    youtube.connect_accounts(channel, state, mdame_env(), accounts)


@contextmanager
def _channel(folder: Path) -> Iterator[youtube.FakeYouTube]:
    """The fake channel on the port it had last time when that port is free: upload session
    URIs recorded by a demo that was killed mid-upload name it, and the next demo resumes
    them (a real channel's session URIs do not move either)."""
    port_file = folder / "youtube.port"
    try:
        port = int(port_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        port = 0
    with ExitStack() as stack:
        try:
            fake = stack.enter_context(youtube.running(folder / "youtube", port=port))
        except OSError:  # taken now: a fresh port (old sessions are then searched for)
            fake = stack.enter_context(youtube.running(folder / "youtube"))
        port_file.write_text(str(urlsplit(fake.base_url).port), encoding="utf-8")
        yield fake


@dataclass(frozen=True)
class FakeServices:
    env: dict[str, str]  # points the production providers at the servers (the caller sets it)
    channel: youtube.FakeYouTube


@contextmanager
def fake_services(folder: Path) -> Iterator[FakeServices]:
    """The local servers for the block (alerts and reports go to the local Bot API)."""
    folder.mkdir(parents=True, exist_ok=True)
    with ExitStack() as servers:
        model = servers.enter_context(gemini.running())
        speech = servers.enter_context(edge_tts.running())
        sources = servers.enter_context(feeds.running(youtube_key=DEMO_YOUTUBE_KEY))
        channel = servers.enter_context(_channel(folder))
        bot = servers.enter_context(telegram.TelegramServer())
        env = {
            "MDAME_PROVIDERS": "fakes",
            "GEMINI_API_KEY": DEMO_GEMINI_KEY,
            "MDAME_GEMINI_BASE_URL": model.base_url,
            "MDAME_EDGE_TTS_URL": speech.wss_url,
            "YOUTUBE_API_KEY": DEMO_YOUTUBE_KEY,
            "MDAME_YOUTUBE_ROOT_URL": channel.base_url,
            "MDAME_GOOGLE_TOKEN_URI": channel.token_uri,
            "MDAME_YOUTUBE_CLIENT_SECRETS": str(_client_secrets(folder)),
            "MDAME_GOOGLE_TRENDS_ROOT_URL": sources.base_url,
            "MDAME_REDDIT_ROOT_URL": sources.base_url,
            "MDAME_TELEGRAM_API_URL": bot.base_url,
            "MDAME_TELEGRAM_BOT_TOKEN": telegram.DEFAULT_TOKEN,
            "MDAME_TELEGRAM_CHAT_ID": DEMO_TELEGRAM_CHAT,
        }
        print(
            f"[demo] fakes: gemini {model.base_url}, edge-tts {speech.base_url}, "
            f"feeds {sources.base_url}, youtube {channel.base_url}, telegram {bot.base_url}",
            file=sys.stderr,
        )
        yield FakeServices(env, channel)


def main() -> int:
    folder = mdame_home() / "fakes"
    with fake_services(folder) as services:
        os.environ.update(services.env)
        state = StateStore()
        try:
            connect_demo_accounts(services.channel, state)
        finally:
            state.close()
        from mdame_cli.main import run_demo  # the definitions read the providers chosen above

        return run_demo(videos_at=f"the local fake channel's state under {folder / 'youtube'}")


if __name__ == "__main__":
    sys.exit(main())
