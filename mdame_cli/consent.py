"""The consent flows of `mdame accounts connect` for TikTok and Instagram (YouTube's is
google-auth-oauthlib's, in accounts.py): the authorization URL, the code the browser is sent
back with, and its exchange for the grant the publisher keeps sealed.

TikTok's Login Kit for Desktop: PKCE (its desktop guide's code_challenge is the hex SHA-256 of
the verifier) and a loopback redirect (`http://127.0.0.1:<port>/callback/`, registered in the
app with a wildcard port), or with --console the operator pastes the address the browser was
sent to. The grant is the refresh token (it rotates; the publisher stores each new one).

Instagram's Business Login: the redirect must be an https URI registered in the app, so the
flow is always the console one: the operator opens the URL, agrees, and pastes the address the
browser was sent to (`--redirect-uri`, the registered one). The code gives a one-hour token,
traded at once for a long-lived one (60 days): that is the grant (the publisher refreshes it
weekly).
"""

from __future__ import annotations

import hashlib
import http.server
import secrets
import sys
import threading
import webbrowser
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx

from mdame_core import settings
from mdame_resources.providers.instagram_api import GRAPH_URL, GRAPH_URL_VAR
from mdame_resources.providers.publisher.instagram import APP_ID_VAR as INSTAGRAM_APP_ID_VAR
from mdame_resources.providers.publisher.instagram import (
    APP_SECRET_VAR as INSTAGRAM_APP_SECRET_VAR,
)
from mdame_resources.providers.tiktok_api import (
    BASE_URL_VAR,
    CLIENT_KEY_VAR,
    CLIENT_SECRET_VAR,
    TIKTOK_BASE_URL,
)

TIKTOK_AUTH_URL_VAR = "MDAME_TIKTOK_AUTH_URL"
TIKTOK_AUTH_URL = "https://www.tiktok.com/v2/auth/authorize/"
TIKTOK_SCOPES = "user.info.basic,video.publish,video.list"
INSTAGRAM_AUTH_URL_VAR = "MDAME_INSTAGRAM_AUTH_URL"
INSTAGRAM_AUTH_URL = "https://www.instagram.com/oauth/authorize"
INSTAGRAM_TOKEN_URL_VAR = "MDAME_INSTAGRAM_TOKEN_URL"
INSTAGRAM_TOKEN_URL = "https://api.instagram.com/oauth/access_token"
INSTAGRAM_SCOPES = "instagram_business_basic,instagram_business_content_publish"


class ConsentError(RuntimeError):
    """The consent did not give a grant; the message names why (the provider's own words)."""


def _required(*names: str) -> list[str]:
    values = [str(settings.get(n) or "") for n in names]
    missing = [n for n, value in zip(names, values, strict=True) if not value]
    if missing:
        raise ConsentError(f"set {', '.join(missing)} (the app's credentials) first")
    return values


def _code_from(address: str, state: str) -> str:
    """The code of the address the browser was sent back to, once its state matches."""
    query = parse_qs(urlsplit(address.strip()).query)
    if "error" in query:
        said = query.get("error_description", query["error"])[0]
        raise ConsentError(f"the consent was refused: {query['error'][0]}: {said}")
    if query.get("state", [""])[0] != state:
        raise ConsentError("the address's state is not this consent's: start again")
    code = query.get("code", [""])[0]
    if not code:
        raise ConsentError("the address carries no code: paste the whole address")
    return code


def _pasted(url: str) -> str:
    print(
        "Open this address in a browser, agree, then paste the address it sent you to "
        f"(it may fail to load; copy it anyway):\n{url}",
        file=sys.stderr,
    )
    return sys.stdin.readline()


def _loopback(url_for: Any, port: int, timeout_s: float = 600.0) -> tuple[str, str]:
    """Serves one request on 127.0.0.1:`port` (0: any free port) and opens the consent URL,
    `url_for(redirect_uri)`, in a browser: (the redirect URI, the address the browser came
    back to)."""
    arrived: list[str] = []

    class Callback(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 - the http.server API
            arrived.append(self.path)
            body = b"MD-AME has the consent; this tab may be closed.\n"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: Any) -> None:
            return  # the code is in the path: never logged

    server = http.server.HTTPServer(("127.0.0.1", port), Callback)
    server.timeout = timeout_s
    redirect_uri = f"http://127.0.0.1:{server.server_address[1]}/callback/"
    url = url_for(redirect_uri)
    print(f"Opening the consent page; if no browser opens, visit:\n{url}", file=sys.stderr)
    threading.Thread(target=webbrowser.open, args=(url,), daemon=True).start()
    try:
        server.handle_request()
    finally:
        server.server_close()
    if not arrived:
        raise ConsentError(f"no browser came back within {timeout_s:.0f} s")
    return redirect_uri, f"http://127.0.0.1:{server.server_address[1]}{arrived[0]}"


def tiktok_grant(console: bool, port: int) -> dict[str, object]:
    """Login Kit for Desktop: the creator's refresh token."""
    client_key, client_secret = _required(CLIENT_KEY_VAR, CLIENT_SECRET_VAR)
    state, verifier = secrets.token_urlsafe(16), secrets.token_urlsafe(48)
    challenge = hashlib.sha256(verifier.encode()).hexdigest()
    auth_url = settings.get(TIKTOK_AUTH_URL_VAR) or TIKTOK_AUTH_URL

    def url_for(redirect_uri: str) -> str:
        query = {
            "client_key": client_key,
            "scope": TIKTOK_SCOPES,
            "response_type": "code",
            "redirect_uri": redirect_uri,
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
        }
        return f"{auth_url}?{urlencode(query)}"

    if console:
        redirect_uri = f"http://127.0.0.1:{port or 8765}/callback/"
        address = _pasted(url_for(redirect_uri))
    else:
        redirect_uri, address = _loopback(url_for, port)
    code = _code_from(address, state)
    base = (settings.get(BASE_URL_VAR) or TIKTOK_BASE_URL).rstrip("/")
    answer = httpx.post(
        f"{base}/v2/oauth/token/",
        data={
            "client_key": client_key,
            "client_secret": client_secret,
            "code": code,
            "grant_type": "authorization_code",
            "redirect_uri": redirect_uri,
            "code_verifier": verifier,
        },
        timeout=30,
    )
    body = _json(answer)
    if answer.status_code != 200 or not body.get("refresh_token"):
        raise ConsentError(
            f"TikTok refused the code: HTTP {answer.status_code} {body.get('error', '')}: "
            f"{body.get('error_description', '')}"
        )
    return {"refresh_token": str(body["refresh_token"])}


def instagram_grant(redirect_uri: str) -> dict[str, object]:
    """Business Login for Instagram: the account's long-lived token (60 days)."""
    app_id, app_secret = _required(INSTAGRAM_APP_ID_VAR, INSTAGRAM_APP_SECRET_VAR)
    if not redirect_uri.startswith("https://") and not redirect_uri.startswith("http://127."):
        raise ConsentError("--redirect-uri must be the https redirect URI registered in the app")
    state = secrets.token_urlsafe(16)
    query = {
        "client_id": app_id,
        "redirect_uri": redirect_uri,
        "response_type": "code",
        "scope": INSTAGRAM_SCOPES,
        "state": state,
    }
    auth_url = settings.get(INSTAGRAM_AUTH_URL_VAR) or INSTAGRAM_AUTH_URL
    code = _code_from(_pasted(f"{auth_url}?{urlencode(query)}"), state)
    # Meta appends "#_" to the redirect; a pasted code may carry it.
    code = code.removesuffix("#_")
    short = httpx.post(
        settings.get(INSTAGRAM_TOKEN_URL_VAR) or INSTAGRAM_TOKEN_URL,
        data={
            "client_id": app_id,
            "client_secret": app_secret,
            "grant_type": "authorization_code",
            "redirect_uri": redirect_uri,
            "code": code,
        },
        timeout=30,
    )
    body = _json(short)
    first = (body.get("data") or [body])[0] if isinstance(body.get("data"), list) else body
    if short.status_code != 200 or not first.get("access_token"):
        raise ConsentError(f"Instagram refused the code: HTTP {short.status_code} {_said(body)}")
    graph = (settings.get(GRAPH_URL_VAR) or GRAPH_URL).rstrip("/")
    long = httpx.get(
        f"{graph}/access_token",
        params={
            "grant_type": "ig_exchange_token",
            "client_secret": app_secret,
            "access_token": str(first["access_token"]),
        },
        timeout=30,
    )
    lived = _json(long)
    if long.status_code != 200 or not lived.get("access_token"):
        raise ConsentError(
            f"Instagram refused the long-lived exchange: HTTP {long.status_code} {_said(lived)}"
        )
    return {"refresh_token": str(lived["access_token"])}


def _json(answer: httpx.Response) -> dict[str, Any]:
    try:
        body = answer.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _said(body: dict[str, Any]) -> str:
    error = body.get("error")
    if isinstance(error, dict):
        return str(error.get("message") or "")
    return f"{error or ''} {body.get('error_message') or body.get('error_description') or ''}"
