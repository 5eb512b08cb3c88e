"""`make demo PROVIDERS=fakes`: the whole graph with the production providers (Gemini writer,
critic and safety; Edge-TTS then Gemini TTS; the httpx trend reader; the YouTube and TikTok
publishers; the visuals chain [generated, stock] with its relevance gate: Gemini stills, Pexels
and Pixabay footage) against this package's local protocol servers, end to end. No GPU, so a
chain of diffusers alone falls back to procedural clips. The image model draws one prompt in
OFF_TOPIC_EVERY off-topic and the stock servers offer off-topic footage, so the gate rejects and
replaces candidates. Nothing leaves 127.0.0.1, and no key here is a secret.

It starts the servers, points the providers at them through the same MDAME_* variables a
deployment sets, stores an encrypted grant for each demo account on its fake (as `mdame
accounts connect` would after a consent), and then runs the ordinary demo. Every niche
cross-posts: the demo reads the niche files through `demo_niches`, which gives each niche
without a TikTok or an Instagram account one (its first handle with `-tiktok` or `-reels`), so
each video is published three times, to the fake YouTube channel, the fake TikTok creator and
the fake Instagram account.

With MDAME_FAKES_RUNNING=1 it starts no server and connects no account: the servers run in
another process that outlives this one (the provider crash harness, tests/chaos/providers.py),
which put their MDAME_* endpoints in the environment and connected the accounts itself.
`--dimension` (repeatable) and `--day` limit the demo to some partitions; `--niches DIR` reads
the niche files from DIR instead of dimensions/.

`inject_random_faults` draws, from a seeded RNG, faults for every server at once (a Gemini
outage, Gemini 429/5xx/drops, the image model's outage, 429/5xx/drops and answers without a
picture or off-topic, Pexels and Pixabay 429 bursts with their rate-limit headers, 5xx and
dropped connections on searches and downloads, Edge-TTS drops, YouTube 5xx / a reset mid chunk /
a lost response, TikTok 5xx / a dropped final chunk / an expired upload, Instagram 5xx / an
interrupted or dropped upload / a lost publish answer / throttling, Telegram 429/5xx, and on
each platform an access token expiring early at a random request, which `inject_token_expiries`
draws alone); `clear_faults` ends them all, keeping what the servers counted.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import yaml

from fakes import edge_tts, feeds, gemini, instagram, pexels, pixabay, telegram, tiktok, youtube
from fakes.common import LocalServer, secret_mark
from fakes.stock_common import environ_for as stock_environ
from mdame_core.settings import dimensions_dir, mdame_env, mdame_home
from mdame_core.state import StateStore

# Keys the local servers accept; stand-ins, never real credentials.
DEMO_TELEGRAM_CHAT = "-1000000000001"  # the fake accepts any chat
DEMO_GEMINI_KEY = "fakes-demo-gemini-key"
DEMO_YOUTUBE_KEY = "fakes-demo-youtube-key"
DEMO_TIKTOK_CLIENT = ("fakes-demo-tiktok-key", "fakes-demo-tiktok-secret")
DEMO_PEXELS_KEY = "fakes-demo-pexels-key"
DEMO_PIXABAY_KEY = "fakes-demo-pixabay-key"
# The image model draws another subject than asked for the first request of one prompt in this
# many, so the relevance gate rejects a candidate and the chain asks for the next.
OFF_TOPIC_EVERY = 3


def demo_secret(name: str) -> str:
    """A stand-in key or client secret, carrying the secret mark when a test sets one
    (fakes.common.SECRET_MARK_VAR)."""
    mark = secret_mark()
    return f"{name}-{mark}" if mark else name


# The requests an access token may expire early on, per platform's server (None: any).
EARLY_EXPIRY_POINTS: dict[str, list[str | None]] = {
    "youtube": ["initiate", "chunk", "status", "list", "thumbnail", None],
    "tiktok": ["creator_info", "init", "chunk", "status", "list", None],
    "instagram": ["account", "limit", "create", "upload", "status", "publish", "list", None],
}
# The account demo_niches gives a niche without one, per platform: its handle's suffix.
CROSS_POSTS = {"tiktok": "-tiktok", "instagram": "-reels"}
# Set (to 1) by whoever runs the servers in a process of its own: use those, start none.
RUNNING_VAR = "MDAME_FAKES_RUNNING"


def _client_secrets(folder: Path) -> Path:
    path = folder / "client_secrets.json"
    installed = {"client_id": "fakes-demo.apps.local", "client_secret": demo_secret("fakes-demo")}
    path.write_text(json.dumps({"installed": installed}), encoding="utf-8")
    return path


def demo_niches(source: Path, folder: Path) -> Path:
    """The niche files of `source`, each niche without an account on a platform of
    CROSS_POSTS given one, written to `folder` (replacing what an earlier demo wrote there);
    returns `folder`."""
    niches = {path.name: path.read_text(encoding="utf-8") for path in source.glob("*.yaml")}
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.yaml"):
        old.unlink()
    for name, text in sorted(niches.items()):
        raw = yaml.safe_load(text)
        accounts = raw.get("accounts") if isinstance(raw, dict) else None
        well_formed = isinstance(accounts, list) and all(isinstance(a, dict) for a in accounts)
        if accounts and well_formed:
            first, platforms = accounts[0].get("handle"), {a.get("platform") for a in accounts}
            for platform, suffix in CROSS_POSTS.items():
                if platform not in platforms:
                    accounts.append({"platform": platform, "handle": f"{first}{suffix}"})
            text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
        # A file that is not a niche's mapping goes as it is: the registry names its problem.
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def connect_demo_accounts(services: FakeServices, state: StateStore, dimensions: Path) -> None:
    """Every active demo account (of the niche files in `dimensions`) gets a channel on its
    fake (TikTok's, Instagram's, YouTube's for the others) and an encrypted grant. `state` is
    an admin client."""
    from mdame_pipeline.dimension_registry import sync_registry

    report = sync_registry(state, dimensions)
    accounts = [a for slug in report.active for a in state.list_accounts(slug) if a.active]
    own = {"tiktok", "instagram"}
    youtube.connect_accounts(
        services.channel, state, mdame_env(), [a for a in accounts if a.platform not in own]
    )
    tiktok.connect_accounts(
        services.tiktok, state, mdame_env(), [a for a in accounts if a.platform == "tiktok"]
    )
    instagram.connect_accounts(
        services.instagram, state, mdame_env(), [a for a in accounts if a.platform == "instagram"]
    )


@contextmanager
def _stable_port(folder: Path, name: str, start: Callable[..., Any]) -> Iterator[Any]:
    """The fake on the port it had last time when that port is free: upload URLs recorded by a
    demo that was killed mid-upload name it, and the next demo resumes them (a real
    platform's upload URLs do not move either)."""
    port_file = folder / f"{name}.port"
    try:
        port = int(port_file.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        port = 0
    with ExitStack() as stack:
        try:
            fake: LocalServer = stack.enter_context(start(folder / name, port=port))
        except OSError:  # taken now: a fresh port (old sessions are then searched for)
            fake = stack.enter_context(start(folder / name))
        port_file.write_text(str(urlsplit(fake.base_url).port), encoding="utf-8")
        yield fake


@dataclass(frozen=True)
class FakeServices:
    env: dict[str, str]  # points the production providers at the servers (the caller sets it)
    channel: youtube.FakeYouTube
    tiktok: tiktok.FakeTikTok
    instagram: instagram.FakeInstagram
    model: gemini.FakeGemini
    speech: edge_tts.EdgeTtsServer
    sources: feeds.FeedServer
    bot: telegram.TelegramServer
    pexels: pexels.FakePexels
    pixabay: pixabay.FakePixabay


@contextmanager
def fake_services(folder: Path) -> Iterator[FakeServices]:
    """The local servers for the block (alerts and reports go to the local Bot API)."""
    folder.mkdir(parents=True, exist_ok=True)
    gemini_key, youtube_key = demo_secret(DEMO_GEMINI_KEY), demo_secret(DEMO_YOUTUBE_KEY)
    tiktok_secret = demo_secret(DEMO_TIKTOK_CLIENT[1])
    bot_token = demo_secret(telegram.DEFAULT_TOKEN)
    with ExitStack() as servers:
        model = servers.enter_context(gemini.running())
        speech = servers.enter_context(edge_tts.running())
        sources = servers.enter_context(feeds.running(youtube_key=youtube_key))
        channel = servers.enter_context(_stable_port(folder, "youtube", youtube.running))
        creators = servers.enter_context(_stable_port(folder, "tiktok", tiktok.running))
        reels = servers.enter_context(_stable_port(folder, "instagram", instagram.running))
        bot = servers.enter_context(telegram.TelegramServer(bot_token))
        model.off_topic_every = OFF_TOPIC_EVERY
        pexels_key, pixabay_key = demo_secret(DEMO_PEXELS_KEY), demo_secret(DEMO_PIXABAY_KEY)
        footage = servers.enter_context(pexels.running(folder / "pexels"))
        footage.keys = {pexels_key}
        more_footage = servers.enter_context(pixabay.running(folder / "pixabay"))
        more_footage.keys = {pixabay_key}
        env = {
            "MDAME_PROVIDERS": "fakes",
            "GEMINI_API_KEY": gemini_key,
            "MDAME_GEMINI_BASE_URL": model.base_url,
            "MDAME_EDGE_TTS_URL": speech.wss_url,
            "YOUTUBE_API_KEY": youtube_key,
            "MDAME_YOUTUBE_ROOT_URL": channel.base_url,
            "MDAME_GOOGLE_TOKEN_URI": channel.token_uri,
            "MDAME_YOUTUBE_CLIENT_SECRETS": str(_client_secrets(folder)),
            "MDAME_TIKTOK_BASE_URL": creators.base_url,
            "MDAME_TIKTOK_CLIENT_KEY": DEMO_TIKTOK_CLIENT[0],
            "MDAME_TIKTOK_CLIENT_SECRET": tiktok_secret,
            # The fake processes a post in half a second; TikTok takes minutes.
            "MDAME_TIKTOK_STATUS_POLL_S": "0.5",
            "MDAME_INSTAGRAM_GRAPH_URL": reels.base_url,
            "MDAME_INSTAGRAM_STATUS_POLL_S": "0.5",
            "MDAME_GOOGLE_TRENDS_ROOT_URL": sources.base_url,
            "MDAME_REDDIT_ROOT_URL": sources.base_url,
            "MDAME_TELEGRAM_API_URL": bot.base_url,
            "MDAME_TELEGRAM_BOT_TOKEN": bot_token,
            "MDAME_TELEGRAM_CHAT_ID": DEMO_TELEGRAM_CHAT,
            "MDAME_PEXELS_API_KEY": pexels_key,
            "MDAME_PIXABAY_API_KEY": pixabay_key,
            **stock_environ(footage, more_footage),
        }
        print(
            f"[demo] fakes: gemini {model.base_url}, edge-tts {speech.base_url}, "
            f"feeds {sources.base_url}, youtube {channel.base_url}, "
            f"tiktok {creators.base_url}, instagram {reels.base_url}, telegram {bot.base_url}, "
            f"pexels {footage.base_url}, pixabay {more_footage.base_url}",
            file=sys.stderr,
        )
        yield FakeServices(
            env, channel, creators, reels, model, speech, sources, bot, footage, more_footage
        )


def inject_random_faults(services: FakeServices, rng: random.Random, outage: bool) -> list[str]:
    """Queues a random handful of faults on every server (`outage`: every Gemini request is
    answered 503 until `clear_faults`). Returns what was injected, one line per server."""
    injected = []
    services.model.outage, services.model.outage_on = (503 if outage else None), None
    if outage:
        injected.append("gemini outage 503")
    gemini_faults = rng.choices(["429", "500", "503", "drop"], k=rng.randint(0, 3))
    for kind in gemini_faults:
        services.model.faults.push(kind, retry_after=1)
    # The image model's own: an outage of it alone over this demo, or faults of its requests
    # (an answer without a picture is billed; an off-topic one is judged and rejected).
    image_faults = rng.choices(
        ["429", "500", "503", "drop", "max_tokens", "off_topic"], k=rng.randint(0, 3)
    )
    if not outage and rng.random() < 0.25:
        services.model.outage, services.model.outage_on = 503, "image"
        injected.append("gemini image model outage 503")
    for kind in image_faults:
        services.model.faults.push(kind, retry_after=1, on="image")
    stock_injected = {
        "pexels": _stock_faults(services.pexels, rng),
        "pixabay": _stock_faults(services.pixabay, rng),
    }
    speech_faults = rng.choices(["drop", "no_audio"], k=rng.randint(0, 2))
    services.speech.faults.push(*speech_faults)
    channel_faults = rng.choices(
        ["initiate_5xx", "reset_mid_chunk", "lost_response"], k=rng.randint(1, 3)
    )
    for kind in channel_faults:
        services.channel.faults.push(kind)
    creator_faults = rng.choices(
        ["init_5xx", "chunk_5xx", "drop_final_chunk", "status_5xx", "expire_publish"],
        k=rng.randint(0, 2),
    )
    for kind in creator_faults:
        services.tiktok.faults.push(kind)
    reel_faults = rng.choices(
        ["create_5xx", "upload_5xx", "interrupt_upload", "drop_upload", "status_5xx",
         "lost_publish", "throttle"],
        k=rng.randint(0, 2),
    )  # fmt: skip
    for kind in reel_faults:
        services.instagram.faults.push(kind)
    bot_faults = rng.choices([429, 500, 503], k=rng.randint(0, 2))
    for status in bot_faults:
        services.bot.fail_next(1, status, retry_after=1)
    injected += inject_token_expiries(services, rng)
    for name, faults in (
        ("gemini", gemini_faults),
        ("gemini image", image_faults),
        ("pexels", stock_injected["pexels"]),
        ("pixabay", stock_injected["pixabay"]),
        ("edge-tts", speech_faults),
        ("youtube", channel_faults),
        ("tiktok", creator_faults),
        ("instagram", reel_faults),
        ("telegram", bot_faults),
    ):
        if faults:
            injected.append(f"{name} {'/'.join(map(str, faults))}")
    return injected


def _stock_faults(server: pexels.FakePexels | pixabay.FakePixabay, rng: random.Random) -> list[str]:
    """Queues a stock server's faults: a burst of 429s (with the rate-limit headers, a reset a
    second or two away), 5xx and dropped connections on searches or downloads."""
    injected = []
    if rng.random() < 0.5:
        burst, reset = rng.randint(1, 4), rng.randint(1, 2)
        for _ in range(burst):
            server.faults.push("rate_limited", reset=reset)
        injected.append(f"429x{burst}")
    for kind in rng.choices(["server_error", "drop"], k=rng.randint(0, 2)):
        on = rng.choice(["search", "file"])
        status = rng.choice([500, 502, 503]) if kind == "server_error" else None
        server.faults.push(kind, on=on, **({"status": status} if status else {}))
        injected.append(f"{status or kind} on {on}")
    return injected


def inject_token_expiries(services: FakeServices, rng: random.Random) -> list[str]:
    """On each platform's server, one or two access tokens refused before their stated expiry,
    each on a random kind of request (or the next one carrying a token): a routine event, which
    the publishers refresh through without asking for a reconnect. Returns one line a server."""
    injected = []
    for name, server in (
        ("youtube", services.channel),
        ("tiktok", services.tiktok),
        ("instagram", services.instagram),
    ):
        points = [rng.choice(EARLY_EXPIRY_POINTS[name]) for _ in range(rng.randint(1, 2))]
        for on in points:
            server.faults.push("expire_token", on=on)
        injected.append(f"{name} token expires early on {'/'.join(p or 'any' for p in points)}")
    return injected


def token_refusals(services: FakeServices) -> int:
    """How many requests the platforms' servers refused for their access token so far."""
    servers = (services.channel, services.tiktok, services.instagram)
    return sum(len(server.unauthorized()) for server in servers)


def clear_faults(services: FakeServices) -> int:
    """Every server answers normally from now on; what they saw and counted stays. Returns
    how many queued faults no request had taken."""
    unfired = (
        len(services.model.faults)
        + len(services.speech.faults.queue)
        + len(services.channel.faults.pending())
        + len(services.tiktok.faults.pending())
        + len(services.instagram.faults.pending())
        + services.bot.queued_faults()
        + len(services.pexels.faults.pending())
        + len(services.pixabay.faults.pending())
    )
    services.model.clear_faults()
    services.speech.faults.clear()
    services.channel.faults.clear()
    services.tiktok.faults.clear()
    services.instagram.faults.clear()
    services.bot.clear_faults()
    services.pexels.clear_faults()
    services.pixabay.clear_faults()
    return unfired


def _run_demo(videos_at: str, day: date | None, only: Sequence[str], niches: Path) -> int:
    # The definitions read the providers chosen by the environment set before this import.
    from mdame_cli.main import run_demo

    return run_demo(videos_at=videos_at, day=day, only=only, dimensions=niches)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dimension", action="append", default=[], help="only these (repeat)")
    parser.add_argument("--day", type=date.fromisoformat, default=None, help="YYYY-MM-DD")
    parser.add_argument("--niches", type=Path, default=None, help="the niche files' folder")
    args = parser.parse_args(argv)
    folder = mdame_home() / "fakes"
    if os.environ.get(RUNNING_VAR) == "1":  # the owner connected the accounts of these niches
        videos_at = "the fakes of the servers' owner"
        return _run_demo(videos_at, args.day, args.dimension, args.niches or dimensions_dir())
    niches = demo_niches(args.niches or dimensions_dir(), folder / "niches")
    with fake_services(folder) as services:
        os.environ.update(services.env)
        state = StateStore(role="admin")  # the operator's part: registry and channel grants
        try:
            connect_demo_accounts(services, state, niches)
        finally:
            state.close()
        videos_at = (
            f"the local fakes' state: YouTube under {folder / 'youtube'}, "
            f"TikTok under {folder / 'tiktok'}, Instagram under {folder / 'instagram'}"
        )
        return _run_demo(videos_at, args.day, args.dimension, niches)


if __name__ == "__main__":
    sys.exit(main())
