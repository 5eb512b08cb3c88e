"""Credentials kept out of anything written down: log lines, Dagster events, error texts, alerts.

Two ways a credential gets into a text. A URL or a form body carries it as a parameter (an
Instagram refresh's `access_token=`, a TikTok upload_url's `upload_token=`, a Google API
`key=`), or an Authorization header is quoted; those are found by name, whatever their value.
A secret the caller knows (an API key read from the environment, a refresh token it opened) is
found by value, as written and URL-encoded. `redact` does both; `Redactor` keeps the known
values of one report (`mdame doctor`'s table, a provider's health findings).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import quote, quote_plus, urlsplit, urlunsplit

REDACTED = "[redacted]"

# Parameter names whose value is a credential, compared case-insensitively; a name ending in
# one of SECRET_SUFFIXES counts too (session_token, app_secret, X-Amz-Signature). A name of
# QUERY_ONLY is one only in a URL's query or a form body (after '?' or '&'): "code" or "key"
# in an error text is an error code or a word.
SECRET_PARAMS = frozenset(
    {
        "access_token",
        "refresh_token",
        "id_token",
        "upload_token",
        "token",
        "key",
        "apikey",
        "api_key",
        "client_secret",
        "code",  # an OAuth authorization code, traded for tokens
        "x-goog-api-key",
        "code_verifier",
        "password",
        "passwd",
        "secret",
        "signature",
        "sig",
        # A resumable upload session's id: whoever holds the session URI can upload to it.
        "upload_id",
    }
)
SECRET_SUFFIXES = ("token", "secret", "password", "apikey", "signature")
QUERY_ONLY = frozenset({"code", "key", "sig"})

_NAME = r"[A-Za-z][A-Za-z0-9_.\-]*"
# name=value in a query, a fragment or a form body, or written out in a text; `lead` is what
# precedes the name (a name glued to a longer word is not one).
_PARAM = re.compile(
    rf"(?P<lead>[?&;#]|(?<![A-Za-z0-9_.\-%]))(?P<name>{_NAME})=(?P<value>[^&#;\s'\"<>]*)"
)
# "name": "value" in a JSON document quoted by an error message.
_JSON_FIELD = re.compile(rf"(?P<head>[\"'](?P<name>{_NAME})[\"']\s*:\s*[\"'])(?P<value>[^\"']*)")
# An Authorization header's credentials (an OAuth 2 bearer token, Meta's "OAuth <token>").
_AUTH_SCHEME = re.compile(r"(?i)\b(?P<scheme>Bearer|OAuth)(?P<gap>\s+)(?=\S*\d)[\w.~+/=-]{12,}")
# Telegram puts the bot token in the path: /bot<id>:<secret>/getMe.
_BOT_PATH = re.compile(r"/bot\d+:[^/\s]+")
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z][a-z0-9+.-]*://)(?P<user>[^:/@\s]*):[^@/\s]+@", re.I)
# Values shorter than this are not masked by value (masking "1" would garble every number); a
# real key or token is far longer.
MIN_SECRET_LEN = 6


def secret_param(name: str, in_query: bool = True) -> bool:
    """Whether a parameter of this name carries a credential: in a URL's query or a form body
    (`in_query`), or elsewhere in a text (a JSON field, name=value in a message)."""
    lowered = name.lower()
    if not in_query and lowered in QUERY_ONLY:
        return False
    return lowered in SECRET_PARAMS or lowered.endswith(SECRET_SUFFIXES)


def _param(m: re.Match[str], mask: str) -> str:
    # In a query or a form: after '?' or '&', or followed by '&' (a form body's first field).
    in_query = bool(m["lead"]) or m.string.startswith("&", m.end())
    if not m["value"] or not secret_param(m["name"], in_query):
        return m[0]
    return f"{m['lead']}{m['name']}={mask}"


def redact(text: str, secrets: Iterable[str] = (), mask: str = REDACTED) -> str:
    """`text` with every credential replaced by `mask`: the values of `secrets` (as written and
    URL-encoded), secret parameters' values, Authorization credentials, a bot token in a path
    and a URL's password."""
    for secret in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LEN}, key=len)[::-1]:
        # Longest first: a secret that contains another is masked whole.
        for form in dict.fromkeys((secret, quote(secret, safe=""), quote_plus(secret))):
            text = text.replace(form, mask)
    text = _PARAM.sub(lambda m: _param(m, mask), text)
    text = _JSON_FIELD.sub(
        lambda m: f"{m['head']}{mask}" if secret_param(m["name"], False) and m["value"] else m[0],
        text,
    )
    text = _AUTH_SCHEME.sub(lambda m: f"{m['scheme']}{m['gap']}{mask}", text)
    text = _BOT_PATH.sub(f"/bot{mask}", text)
    return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:{mask}@", text)


class Redactor:
    """`redact` with the secrets of one report: every detail goes through it before it is
    printed, error messages of client libraries included."""

    def __init__(self, secrets: Iterable[str] = (), mask: str = "***") -> None:
        self._secrets: set[str] = set()
        self.mask = mask
        self.add(*secrets)

    def add(self, *secrets: str) -> None:
        self._secrets |= {s for s in secrets if s and len(s) >= MIN_SECRET_LEN}

    def __call__(self, text: str) -> str:
        return redact(text, self._secrets, self.mask)


def display_url(url: str) -> str:
    """A URL as it may be printed: no password, no query string (it may carry keys)."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc = f"{netloc}:{parts.port}"
    if parts.username:
        netloc = f"{parts.username}@{netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
