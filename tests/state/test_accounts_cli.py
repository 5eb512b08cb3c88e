"""`mdame accounts connect|list` and `mdame keys rotate`, run as an operator would, against the
fake's OAuth endpoints: the grant is stored only encrypted and never printed."""

from __future__ import annotations

import http.client
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode, urlsplit

from test_fencing import hold
from youtube_kit import REFRESH_TOKEN, client_secrets

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
