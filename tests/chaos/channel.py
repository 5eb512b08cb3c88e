"""The YouTube channel of the crash harness's publisher mode (`--publisher youtube`).

Each case gets its own fake YouTube server (fakes/youtube.py) in a process of its own, started
by the harness: killing the pipeline's child never kills the channel, which keeps every session,
byte and counter in the case's state folder. The demo accounts' grants are sealed once into the
seed database (each case's database is a copy of it), with one refresh token per handle that
every case's channel is given.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdame_core.state import StateStore
from mdame_domain.credentials import MasterKey, associated_data, seal_grant
from tests.adminkit import as_admin

_LISTENING = re.compile(r"fake YouTube on (http://\S+/) \(token endpoint (\S+)\)")


@dataclass(frozen=True)
class Grants:
    """What the child needs to publish: the master key, the OAuth client, and the tokens the
    channel must honour (handle -> refresh token)."""

    master: MasterKey
    client_secrets: Path
    tokens: dict[str, str]


def seal_grants(state: StateStore, dimension: str, folder: Path, env: str = "dev") -> Grants:
    """Stores an encrypted grant for each active account of `dimension` (as `mdame accounts
    connect` would after a consent) and writes the installed-app client file."""
    master = MasterKey.generate()
    tokens = {}
    for account in state.list_accounts(dimension):
        if not account.active:
            continue
        token = f"1//chaos-{account.handle}-not-secret"
        envelope = seal_grant(
            master,
            associated_data(env, account.platform, account.handle),
            {"refresh_token": token},
        )
        as_admin(state).store_account_credential(
            account.id, envelope.key_id, envelope.wrapped_key, envelope.ciphertext
        )
        tokens[account.handle] = token
    secrets = folder / "client_secrets.json"
    installed = {"client_id": "chaos.apps.local", "client_secret": "chaos-not-secret"}
    secrets.write_text(json.dumps({"installed": installed}), encoding="utf-8")
    return Grants(master, secrets, tokens)


class ChannelProcess:
    """`python -m fakes.youtube` on an ephemeral port with a state folder of its own."""

    def __init__(self, state_dir: Path, tokens: dict[str, str]) -> None:
        self.state_dir = state_dir
        self._log = open(state_dir.with_suffix(".log"), "w", encoding="utf-8")  # noqa: SIM115
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "fakes.youtube", "--state-dir", str(state_dir)]
            + [f"--channel={handle}={token}" for handle, token in tokens.items()],
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=Path(__file__).resolve().parents[2],
        )
        assert self._proc.stdout is not None
        line = self._proc.stdout.readline()
        found = _LISTENING.search(line)
        if found is None:
            self.stop()
            raise RuntimeError(f"the fake YouTube did not start: {line!r} (see {self._log.name})")
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
