"""TikTok's desktop consent with its loopback redirect, as a browser drives it: the consent
page (the local TikTok server agrees at once) sends the browser back to the command's own
listener on 127.0.0.1, and the code's exchange, PKCE-checked, gives the refresh token."""

from __future__ import annotations

import threading
from pathlib import Path

import httpx
import pytest

from fakes import tiktok
from mdame_cli.consent import ConsentError, tiktok_grant


def test_the_loopback_consent_gives_the_creators_refresh_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with tiktok.running(tmp_path / "tiktok") as fake:
        open_id = fake.add_creator("tech.tt", "rft.before-consent")
        monkeypatch.setenv("MDAME_TIKTOK_BASE_URL", fake.base_url)
        monkeypatch.setenv("MDAME_TIKTOK_AUTH_URL", f"{fake.base_url}v2/auth/authorize/")
        monkeypatch.setenv("MDAME_TIKTOK_CLIENT_KEY", "ck")
        monkeypatch.setenv("MDAME_TIKTOK_CLIENT_SECRET", "cs-not-secret")
        visited: list[str] = []

        def browser(url: str) -> bool:  # the operator's browser: consent, then the redirect
            visited.append(url)
            threading.Thread(
                target=lambda: httpx.get(url, follow_redirects=True, timeout=10), daemon=True
            ).start()
            return True

        monkeypatch.setattr("webbrowser.open", browser)
        grant = tiktok_grant(console=False, port=0)

    assert grant == {"refresh_token": fake.refresh_token(open_id)}
    [url] = visited
    assert "code_challenge_method=S256" in url and "redirect_uri=http%3A%2F%2F127.0.0.1%3A" in url


def test_without_the_apps_key_the_consent_names_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("MDAME_TIKTOK_CLIENT_KEY", raising=False)
    monkeypatch.setenv("MDAME_TIKTOK_CLIENT_SECRET", "cs")
    with pytest.raises(ConsentError, match="MDAME_TIKTOK_CLIENT_KEY"):
        tiktok_grant(console=True, port=0)
