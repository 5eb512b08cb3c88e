"""`mdame accounts connect|list` and `mdame keys rotate`, run as an operator would, against the
fake's OAuth endpoints: the grant is stored only encrypted and never printed."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
from test_fencing import hold
from youtube_kit import REFRESH_TOKEN, client_secrets

from fakes import instagram, tiktok
from fakes.youtube import running
from mdame_core.settings import REPO_ROOT
from mdame_domain.credentials import Envelope, associated_data, open_grant, read_key_file
from tests.adminkit import as_admin


def _mdame(args: list[str], env: dict[str, str], stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mdame_cli.main", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "ENV": "dev", **env},
        timeout=60,
    )


def _consent(base_url: str) -> str:
    """What the browser does: agree on the consent page, and get sent back with a code."""
    url = urlsplit(base_url)
    conn = http.client.HTTPConnection(url.netloc, timeout=10)
    query = urlencode({"redirect_uri": "http://127.0.0.1:8765/", "login_hint": "@tech"})
    conn.request("GET", f"/o/oauth2/auth?{query}")
    resp = conn.getresponse()
    assert resp.status == 302
    return str(resp.headers["Location"])


def test_connect_list_rotate_and_needs_reauth(state, fresh_db, tmp_path: Path) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    account = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    with running(tmp_path / "fake") as fake:
        fake.add_channel("@tech", REFRESH_TOKEN)
        secrets = client_secrets(tmp_path / "client.json", fake)
        env = {
            "MDAME_DATABASE_URL": fresh_db.owner,
            "MDAME_APP_DATABASE_URL": fresh_db.app,
            "MDAME_HOME": str(tmp_path / "home"),
            "MDAME_YOUTUBE_CLIENT_SECRETS": str(secrets),
            "MDAME_MASTER_KEY": "",
        }
        connected = _mdame(
            ["accounts", "connect", "tech", "--console"], env, stdin=_consent(fake.base_url)
        )
        assert connected.returncode == 0, connected.stderr
        key_file = tmp_path / "home" / "master.key"
        assert oct(key_file.stat().st_mode & 0o777) == "0o600"

        stored = state.account_credential(account)
        assert stored is not None and REFRESH_TOKEN.encode() not in stored[1] + stored[2]
        aad = associated_data("dev", "youtube", "@tech")
        assert open_grant(read_key_file(key_file), aad, Envelope(*stored)) == {
            "refresh_token": REFRESH_TOKEN
        }

        listed = _mdame(["accounts", "list"], env)
        assert listed.returncode == 0, listed.stderr
        [row] = [line.split() for line in listed.stdout.splitlines() if "@tech" in line]
        assert row == ["tech", "youtube", "@tech", "true", "yes", "ok"]

        old_id = stored[0]
        rotated = _mdame(["keys", "rotate"], env)
        assert rotated.returncode == 0, rotated.stderr
        key = read_key_file(key_file)
        again = state.account_credential(account)
        assert again is not None and again[0] == key.key_id != old_id
        assert again[2] == stored[2]  # the ciphertext stays; only the data key is re-wrapped
        assert open_grant(key, aad, Envelope(*again))["refresh_token"] == REFRESH_TOKEN

        held = hold(state, "tech")
        held.mark_needs_reauth(account, "invalid_grant")
        listed = _mdame(["accounts", "list"], env)
        assert "needs_reauth" in listed.stdout

        everything = "".join(p.stdout + p.stderr for p in (connected, listed, rotated))
        assert REFRESH_TOKEN not in everything
        assert key.encoded() not in everything


def _started_connect(args: list[str], env: dict[str, str]) -> tuple[subprocess.Popen, str]:
    """`mdame accounts connect ... --console` started as an operator runs it, and the consent
    URL it printed (with what it printed before it)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mdame_cli.main", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(REPO_ROOT), "ENV": "dev", **env},
    )
    assert proc.stderr is not None
    printed = []
    while not printed or not printed[-1].startswith("http"):
        line = proc.stderr.readline()
        assert line, "".join(printed)
        printed.append(line)
    return proc, "".join(printed)


def _connect_through_consent(args: list[str], env: dict[str, str]) -> tuple[int, str, str]:
    """Agree on the consent page the command printed (the fake agrees at once) and paste the
    address the browser was sent to."""
    proc, printed = _started_connect(args, env)
    consent = httpx.get(printed.splitlines()[-1].strip(), follow_redirects=False, timeout=10)
    assert consent.status_code == 302, consent.text
    out, err = proc.communicate(consent.headers["Location"] + "\n", timeout=60)
    return proc.returncode, out, printed + err


def _env(fresh_db: Any, tmp_path: Path, **extra: str) -> dict[str, str]:
    return {
        "MDAME_DATABASE_URL": fresh_db.owner,
        "MDAME_APP_DATABASE_URL": fresh_db.app,
        "MDAME_HOME": str(tmp_path / "home"),
        "MDAME_MASTER_KEY": "",
        **extra,
    }


@contextmanager
def _tiktok_creator(state, fresh_db, tmp_path: Path) -> Iterator[tuple[Any, str, int, dict]]:
    """tech's TikTok account, its creator on the local TikTok server, and the CLI's environment
    pointed at it: (server, open_id, account id, env)."""
    as_admin(state).upsert_dimension("tech", "Tech")
    account = as_admin(state).upsert_dimension_account("tech", "tiktok", "tech.tt", 15)
    with tiktok.running(tmp_path / "tiktok") as fake:
        open_id = fake.add_creator("tech.tt", "rft.before-consent")
        env = _env(
            fresh_db,
            tmp_path,
            MDAME_TIKTOK_BASE_URL=fake.base_url,
            MDAME_TIKTOK_AUTH_URL=f"{fake.base_url}v2/auth/authorize/",
            MDAME_TIKTOK_CLIENT_KEY="ck",
            MDAME_TIKTOK_CLIENT_SECRET="cs-not-secret",
        )
        yield fake, open_id, account, env


def test_connect_a_tiktok_creator_with_pkce(state, fresh_db, tmp_path: Path) -> None:
    with _tiktok_creator(state, fresh_db, tmp_path) as (fake, open_id, account, env):
        code, out, err = _connect_through_consent(
            ["accounts", "connect", "tech", "--platform", "tiktok", "--console"], env
        )
        assert code == 0, err
        assert "connected tiktok:tech.tt" in out
        token = fake.refresh_token(open_id)  # issued by the code's exchange (PKCE checked)
        stored = state.account_credential(account)
        assert stored is not None and token.encode() not in stored[1] + stored[2]
        key = read_key_file(tmp_path / "home" / "master.key")
        aad = associated_data("dev", "tiktok", "tech.tt")
        assert open_grant(key, aad, Envelope(*stored)) == {"refresh_token": token}
        assert token not in out + err and "cs-not-secret" not in out + err


def test_a_tiktok_code_without_its_verifier_is_refused(state, fresh_db, tmp_path: Path) -> None:
    """The fake checks PKCE: a pasted address from another consent (its challenge not this
    verifier's) is refused with TikTok's words, and nothing is stored."""
    with _tiktok_creator(state, fresh_db, tmp_path) as (fake, open_id, account, env):
        code = fake.issue_code(open_id, "http://127.0.0.1:8765/callback/", "0" * 64)
        proc, printed = _started_connect(
            ["accounts", "connect", "tech", "--platform", "tiktok", "--console"], env
        )
        url = printed.splitlines()[-1]
        state_param = parse_qs(urlsplit(url.strip()).query)["state"][0]
        pasted = f"http://127.0.0.1:8765/callback/?code={code}&state={state_param}\n"
        _out, err = proc.communicate(pasted, timeout=60)
        assert proc.returncode != 0
        assert "Code verifier or code challenge is invalid" in err and "nothing was stored" in err
        assert state.account_credential(account) is None


def test_connect_an_instagram_account_for_a_long_lived_token(
    state, fresh_db, tmp_path: Path
) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    account = as_admin(state).upsert_dimension_account("tech", "instagram", "tech.reels", 50)
    with instagram.running(tmp_path / "instagram") as fake:
        uid = fake.add_account("tech.reels", "IGAA-before-consent")
        env = _env(
            fresh_db,
            tmp_path,
            MDAME_INSTAGRAM_GRAPH_URL=fake.base_url,
            MDAME_INSTAGRAM_AUTH_URL=f"{fake.base_url}oauth/authorize",
            MDAME_INSTAGRAM_TOKEN_URL=f"{fake.base_url}oauth/access_token",
            MDAME_INSTAGRAM_APP_ID="1234",
            MDAME_INSTAGRAM_APP_SECRET="app-secret-not-secret",
        )
        code, out, err = _connect_through_consent(
            ["accounts", "connect", "tech", "--platform", "instagram", "--console",
             "--redirect-uri", "https://mdame.example/instagram/callback"],
            env,
        )  # fmt: skip
        assert code == 0, err
        stored = state.account_credential(account)
        assert stored is not None
        key = read_key_file(tmp_path / "home" / "master.key")
        grant = open_grant(
            key, associated_data("dev", "instagram", "tech.reels"), Envelope(*stored)
        )
        token = str(grant["refresh_token"])
        tokens = fake.snapshot()["tokens"]
        # The long-lived token (60 days), not the one-hour one the code gave.
        assert tokens[token]["account"] == uid
        assert tokens[token]["expires"] - tokens[token]["issued"] > 50 * 86400
        assert token not in out + err and "app-secret-not-secret" not in out + err
