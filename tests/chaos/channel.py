"""The channels of the crash harness's publisher mode (`--publisher youtube|tiktok`).

Each case gets its own fake server (fakes/youtube/ or fakes/tiktok/) in a process of its
own, started by the harness: killing the pipeline's child never kills the channel, which keeps
every session, byte and counter in the case's state folder. The demo accounts' grants are
sealed once into the seed database (each case's database is a copy of it), with one refresh
token per handle that every case's channel is given.

Both speak to the invariants through one view (ChannelView): the videos the channel holds,
the initiations it received and what it charged each account.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from mdame_core.state import StateStore
from mdame_domain.credentials import MasterKey, associated_data, seal_grant
from tests.adminkit import as_admin

_LISTENING = re.compile(
    r"fake (?:YouTube|TikTok|Instagram) on (http://\S+/)(?: \(token endpoint (\S+)\))?"
)
TIKTOK_CLIENT = ("chaos-client-key", "chaos-client-secret-not-secret")


@dataclass(frozen=True)
class Posted:
    """A video on a channel: the ids a publication may name it by, its account's handle, the
    text its marker is in, and its bytes' SHA-256."""

    ids: frozenset[str]
    handle: str
    text: str
    sha256: str


@dataclass(frozen=True)
class ChannelView:
    """What the invariants compare the database with."""

    accounts: frozenset[str]  # the handles the channel serves
    videos: list[Posted]
    initiations: list[str]  # the text of every initiation the channel received, counted or not
    # (handle, ledger bucket) -> calls the channel counted, all days
    charged: dict[tuple[str, str], int] = field(default_factory=dict)


def instagram_view(data: dict[str, Any], state_dir: Path) -> ChannelView:
    """A fakes.instagram state (`/_fake/state`, bytes under `state_dir`) as the invariants read
    it: every published reel counts against the 24-hour publishing limit (the insert bucket),
    each media list call answered is a unit (one refused for its token is sent again in the
    same metered call), and every container is an initiation."""
    handles = {uid: a["username"] for uid, a in data["accounts"].items()}
    containers = data["containers"]
    videos = [
        Posted(
            frozenset({m["id"]}),
            handles.get(m["account"], ""),
            str(m.get("caption") or ""),
            hashlib.sha256(
                (state_dir / "bytes" / f"{m['container']}.bin").read_bytes()
            ).hexdigest(),
        )
        for m in data["media"].values()
    ]
    charged: dict[tuple[str, str], int] = {}
    for m in data["media"].values():
        key = (handles.get(m["account"], ""), "insert")
        charged[key] = charged.get(key, 0) + 1
    for uid, handle in handles.items():
        listed = [r for r in data["requests"] if r.startswith("GET ") and f"/{uid}/media?" in r]
        refused = [r for r in data.get("refused", []) if r in listed]
        charged[(handle, "units")] = len(listed) - len(refused)
    initiations = [str(c["params"].get("caption", "")) for c in containers.values()]
    return ChannelView(frozenset(handles.values()), videos, initiations, charged)


def merged(*views: ChannelView) -> ChannelView:
    """The views of several channels as one (their accounts' handles are distinct)."""
    return ChannelView(
        frozenset().union(*(v.accounts for v in views)),
        [video for v in views for video in v.videos],
        [text for v in views for text in v.initiations],
        {key: n for v in views for key, n in v.charged.items()},
    )


class Channel(Protocol):
    """A fake channel the invariants can read."""

    def view(self) -> ChannelView: ...


def youtube_view(data: dict[str, Any], video_bytes: Callable[[str], bytes]) -> ChannelView:
    """A fakes.youtube state (`/_fake/state`) as the invariants read it."""
    handles = {cid: ch["handle"] for cid, ch in data["channels"].items()}
    videos = [
        Posted(
            frozenset({v["id"]}),
            handles.get(v["channel"], ""),
            v["snippet"].get("description", ""),
            hashlib.sha256(video_bytes(v["upload_id"])).hexdigest(),
        )
        for v in data["videos"].values()
    ]
    charged: dict[tuple[str, str], int] = {}
    for day in data["counters"].values():
        for cid, buckets in day.items():
            for bucket, calls in buckets.items():
                key = (handles.get(cid, ""), bucket)
                charged[key] = charged.get(key, 0) + int(calls)
    initiations = [i["description"] for i in data.get("initiations", [])]
    return ChannelView(frozenset(handles.values()), videos, initiations, charged)


def tiktok_view(data: dict[str, Any], state_dir: Path) -> ChannelView:
    """A fakes.tiktok state (`/_fake/state`, bytes under `state_dir`) as the invariants read
    it: every initialized post counts against the creator's daily cap (the insert bucket), and
    each authenticated video list call is a unit."""
    handles = {oid: c["username"] for oid, c in data["creators"].items()}
    publishes = data["publishes"]
    videos = []
    for video in data["videos"].values():
        publish_id = video["publish_id"]
        blob = state_dir / "bytes" / f"{publish_id.replace('~', '_')}.bin"
        videos.append(
            Posted(
                # A post is named by its public id once it has one, else its publish_id.
                frozenset({video["id"], publish_id}),
                handles.get(video["open_id"], ""),
                str(publishes.get(publish_id, {}).get("post_info", {}).get("title", "")),
                hashlib.sha256(blob.read_bytes()).hexdigest(),
            )
        )
    charged: dict[tuple[str, str], int] = {}
    for pub in publishes.values():
        key = (handles.get(pub["open_id"], ""), "insert")
        charged[key] = charged.get(key, 0) + 1
    for open_id, calls in data.get("list_calls", {}).items():
        charged[(handles.get(open_id, ""), "units")] = int(calls)
    initiations = [str(p["post_info"].get("title", "")) for p in publishes.values()]
    return ChannelView(frozenset(handles.values()), videos, initiations, charged)


@dataclass(frozen=True)
class Grants:
    """What the child needs to publish: the master key, the OAuth client, and the tokens the
    channel must honour (handle -> refresh token)."""

    master: MasterKey
    client_secrets: Path
    tokens: dict[str, str]


def platform_niche(dimension: str, folder: Path, platform: str) -> Path:
    """A niche folder holding only `dimension`'s file, its accounts replaced by one account of
    `platform` with the same handle (the harness's TikTok and Instagram modes); returns the
    folder."""
    import yaml

    from mdame_core.settings import dimensions_dir

    raw = yaml.safe_load((dimensions_dir() / f"{dimension}.yaml").read_text(encoding="utf-8"))
    handle = raw["accounts"][0]["handle"]
    raw["accounts"] = [{"platform": platform, "handle": handle}]
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{dimension}.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    return folder


def _store_grant(state: StateStore, master: MasterKey, account: Any, token: str, env: str) -> None:
    envelope = seal_grant(
        master, associated_data(env, account.platform, account.handle), {"refresh_token": token}
    )
    as_admin(state).store_account_credential(
        account.id, envelope.key_id, envelope.wrapped_key, envelope.ciphertext
    )


def seal_grants(state: StateStore, dimension: str, folder: Path, env: str = "dev") -> Grants:
    """Stores an encrypted grant for each active account of `dimension` (as `mdame accounts
    connect` would after a consent) and writes the installed-app client file."""
    master = MasterKey.generate()
    tokens = {}
    for account in state.list_accounts(dimension):
        if not account.active:
            continue
        token = f"1//chaos-{account.handle}-not-secret"
        _store_grant(state, master, account, token, env)
        tokens[account.handle] = token
    secrets = folder / "client_secrets.json"
    installed = {"client_id": "chaos.apps.local", "client_secret": "chaos-not-secret"}
    secrets.write_text(json.dumps({"installed": installed}), encoding="utf-8")
    return Grants(master, secrets, tokens)


class ChannelProcess:
    """`python -m fakes.youtube` on an ephemeral port with a state folder of its own."""

    module, account_flag = "fakes.youtube", "--channel"
    extra_args: tuple[str, ...] = ()

    def __init__(self, state_dir: Path, tokens: dict[str, str]) -> None:
        self.state_dir = state_dir
        self._log = open(state_dir.with_suffix(".log"), "w", encoding="utf-8")  # noqa: SIM115
        self._proc = subprocess.Popen(
            [sys.executable, "-m", self.module, "--state-dir", str(state_dir), *self.extra_args]
            + [f"{self.account_flag}={handle}={token}" for handle, token in tokens.items()],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert self._proc.stdout is not None
        found, line = None, "-"
        while found is None and line:  # the banner, after any lines about accounts made
            line = self._proc.stdout.readline()
            found = _LISTENING.search(line)
        if found is None:
            self.stop()
            raise RuntimeError(f"{self.module} did not start: {line!r} (see {self._log.name})")
        self.base_url, self.token_uri = found.group(1), found.group(2)

    def env(self, grants: Grants) -> dict[str, str]:
        """Points the child's YouTubePublisher at this channel with the sealed grants."""
        return {
            "MDAME_YOUTUBE_ROOT_URL": self.base_url,
            "MDAME_GOOGLE_TOKEN_URI": self.token_uri,
            "MDAME_YOUTUBE_CLIENT_SECRETS": str(grants.client_secrets),
            "MDAME_MASTER_KEY": grants.master.encoded(),
        }

    def state(self) -> dict[str, Any]:
        """The channel's whole state, as the running server holds it."""
        with urllib.request.urlopen(f"{self.base_url}_fake/state", timeout=10) as answer:
            data: dict[str, Any] = json.loads(answer.read())
            return data

    def video_bytes(self, upload_id: str) -> bytes:
        return (self.state_dir / "bytes" / f"{upload_id}.bin").read_bytes()

    def view(self) -> ChannelView:
        return youtube_view(self.state(), self.video_bytes)

    def stop(self) -> None:
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stdout is not None:
            self._proc.stdout.close()
        self._log.close()


class TikTokProcess(ChannelProcess):
    """`python -m fakes.tiktok` for an audited app (public posts are listed, so a lost answer
    can be searched for), its creators' posts processed at once."""

    module, account_flag = "fakes.tiktok", "--creator"
    extra_args = ("--audited",)

    def __init__(self, state_dir: Path, tokens: dict[str, str]) -> None:
        super().__init__(state_dir, tokens)
        limits = json.dumps({"processing_delay": 0}).encode()
        request = urllib.request.Request(f"{self.base_url}_fake/limits", limits, method="POST")
        urllib.request.urlopen(request, timeout=10).close()

    def env(self, grants: Grants) -> dict[str, str]:
        """Points the child's TikTokPublisher at this server with the sealed grants."""
        return {
            "MDAME_TIKTOK_BASE_URL": self.base_url,
            "MDAME_TIKTOK_CLIENT_KEY": TIKTOK_CLIENT[0],
            "MDAME_TIKTOK_CLIENT_SECRET": TIKTOK_CLIENT[1],
            "MDAME_MASTER_KEY": grants.master.encoded(),
        }

    def view(self) -> ChannelView:
        return tiktok_view(self.state(), self.state_dir)

    def reconnect(
        self, state: StateStore, grants: Grants, dimension: str, env: str = "dev"
    ) -> None:
        """What an operator's `mdame accounts connect` does for every account of `dimension`:
        the creator consents again (a new grant on the server) and it is sealed in the database
        (which also clears the account's needs_reauth)."""
        for account in state.list_accounts(dimension):
            if not account.active:
                continue
            token = f"chaos-{account.handle}-reconnected-not-secret"
            spec = {"username": account.handle, "refresh_token": token, "audited": True}
            request = urllib.request.Request(
                f"{self.base_url}_fake/creators", json.dumps(spec).encode(), method="POST"
            )
            urllib.request.urlopen(request, timeout=10).close()
            _store_grant(state, grants.master, account, token, "dev")


class InstagramProcess(ChannelProcess):
    """`python -m fakes.instagram`, its containers processed at once."""

    module, account_flag = "fakes.instagram", "--account"
    extra_args = ("--processing-delay", "0")

    def env(self, grants: Grants) -> dict[str, str]:
        """Points the child's InstagramPublisher at this server with the sealed grants."""
        return {
            "MDAME_INSTAGRAM_GRAPH_URL": self.base_url,
            "MDAME_MASTER_KEY": grants.master.encoded(),
        }

    def view(self) -> ChannelView:
        return instagram_view(self.state(), self.state_dir)
