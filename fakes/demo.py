"""`make demo PROVIDERS=fakes`: the whole graph with the production providers (Gemini writer,
critic and safety; Edge-TTS then Gemini TTS; the httpx trend reader; the YouTube publisher)
against this package's local protocol servers, end to end. Only the visuals stay procedural (no
GPU). Nothing leaves 127.0.0.1, and no key here is a secret.

It starts the servers, points the providers at them through the same MDAME_* variables a
deployment sets, stores an encrypted grant for each demo account on the fake channel (as
`mdame accounts connect` would after a consent), and then runs the ordinary demo.

With MDAME_FAKES_RUNNING=1 it starts no server and connects no account: the servers run in
another process that outlives this one (the provider crash harness, tests/chaos/providers.py),
which put their MDAME_* endpoints in the environment and connected the accounts itself.
`--dimension` (repeatable) and `--day` limit the demo to some partitions; `--niches DIR` reads
the niche files from DIR instead of dimensions/.

`inject_random_faults` draws, from a seeded RNG, faults for every server at once (a Gemini
outage, Gemini 429/5xx/drops, Edge-TTS drops, YouTube 5xx / a reset mid chunk / a lost response,
Telegram 429/5xx); `clear_faults` ends them all, keeping what the servers counted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from urllib.parse import urlsplit

from fakes import edge_tts, feeds, gemini, telegram, youtube
from mdame_core.settings import mdame_env, mdame_home
from mdame_core.state import StateStore

# Keys the local servers accept; stand-ins, never real credentials.
DEMO_TELEGRAM_CHAT = "-1000000000001"  # the fake accepts any chat
DEMO_GEMINI_KEY = "fakes-demo-gemini-key"
DEMO_YOUTUBE_KEY = "fakes-demo-youtube-key"
# Set (to 1) by whoever runs the servers in a process of its own: use those, start none.
RUNNING_VAR = "MDAME_FAKES_RUNNING"


def _client_secrets(folder: Path) -> Path:
    path = folder / "client_secrets.json"
    installed = {"client_id": "fakes-demo.apps.local", "client_secret": "fakes-demo"}
    path.write_text(json.dumps({"installed": installed}), encoding="utf-8")
    return path


def connect_demo_accounts(
    channel: youtube.FakeYouTube, state: StateStore, dimensions: Path | None = None
) -> None:
    """Every active demo account (of the niche files in `dimensions`, by default
    settings.dimensions_dir()) gets a channel on the fake and an encrypted grant. `state` is an
    admin client."""
    from mdame_pipeline.dimension_registry import sync_registry

    report = sync_registry(state, dimensions)
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
    model: gemini.FakeGemini
    speech: edge_tts.EdgeTtsServer
    sources: feeds.FeedServer
    bot: telegram.TelegramServer


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
        yield FakeServices(env, channel, model, speech, sources, bot)


def inject_random_faults(services: FakeServices, rng: random.Random, outage: bool) -> list[str]:
    """Queues a random handful of faults on every server (`outage`: every Gemini request is
    answered 503 until `clear_faults`). Returns what was injected, one line per server."""
    injected = []
    services.model.outage = 503 if outage else None
    if outage:
        injected.append("gemini outage 503")
    gemini_faults = rng.choices(["429", "500", "503", "drop"], k=rng.randint(0, 3))
    for kind in gemini_faults:
        services.model.faults.push(kind, retry_after=1)
    speech_faults = rng.choices(["drop", "no_audio"], k=rng.randint(0, 2))
    services.speech.faults.push(*speech_faults)
    channel_faults = rng.choices(
        ["initiate_5xx", "reset_mid_chunk", "lost_response"], k=rng.randint(1, 3)
    )
    for kind in channel_faults:
        services.channel.faults.push(kind)
    bot_faults = rng.choices([429, 500, 503], k=rng.randint(0, 2))
    for status in bot_faults:
        services.bot.fail_next(1, status, retry_after=1)
    for name, faults in (
        ("gemini", gemini_faults),
        ("edge-tts", speech_faults),
        ("youtube", channel_faults),
        ("telegram", bot_faults),
    ):
        if faults:
            injected.append(f"{name} {'/'.join(map(str, faults))}")
    return injected


def clear_faults(services: FakeServices) -> int:
    """Every server answers normally from now on; what they saw and counted stays. Returns
    how many queued faults no request had taken."""
    unfired = (
        len(services.model.faults)
        + len(services.speech.faults.queue)
        + len(services.channel.faults.pending())
        + services.bot.queued_faults()
    )
    services.model.clear_faults()
    services.speech.faults.clear()
    services.channel.faults.clear()
    services.bot.clear_faults()
    return unfired


def _run_demo(
    videos_at: str, day: date | None, only: Sequence[str], niches: Path | None = None
) -> int:
    # The definitions read the providers chosen by the environment set before this import.
    from mdame_cli.main import run_demo

    if day is None and not only and niches is None:
        return run_demo(videos_at=videos_at)
    # What run_demo sets up, for some partitions only.
    from mdame_cli.demo import main as demo_main
    from mdame_core.dagster_home import apply_dagster_environment
    from mdame_core.settings import use_scratch_tmpdir

    use_scratch_tmpdir()
    apply_dagster_environment()
    os.environ.setdefault("MDAME_LOG_FILE", str(mdame_home() / "logs" / "pipeline.jsonl"))
    Path(os.environ["MDAME_LOG_FILE"]).parent.mkdir(parents=True, exist_ok=True)

    code = demo_main(day, only=only, videos_at=videos_at, dimensions=niches)
    print(f"JSON pipeline log: {os.environ['MDAME_LOG_FILE']}")
    return code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dimension", action="append", default=[], help="only these (repeat)")
    parser.add_argument("--day", type=date.fromisoformat, default=None, help="YYYY-MM-DD")
    parser.add_argument("--niches", type=Path, default=None, help="the niche files' folder")
    args = parser.parse_args(argv)
    folder = mdame_home() / "fakes"
    if os.environ.get(RUNNING_VAR) == "1":
        videos_at = "the fake channel of the servers' owner"
        return _run_demo(videos_at, args.day, args.dimension, args.niches)
    with fake_services(folder) as services:
        os.environ.update(services.env)
        state = StateStore(role="admin")  # the operator's part: registry and channel grants
        try:
            connect_demo_accounts(services.channel, state, args.niches)
        finally:
            state.close()
        videos_at = f"the local fake channel's state under {folder / 'youtube'}"
        return _run_demo(videos_at, args.day, args.dimension, args.niches)


if __name__ == "__main__":
    sys.exit(main())
