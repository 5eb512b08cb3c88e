"""`mdame accounts connect|list` and `mdame keys rotate`: channel grants, stored encrypted.

connect runs Google's installed-app OAuth flow (google-auth-oauthlib) for the upload and
read-only scopes: a loopback redirect on 127.0.0.1, or with --console (headless hosts) the
consent URL is printed and the address the browser was sent back to is pasted in. The refresh
token is sealed in an AES-256-GCM envelope (mdame_domain.credentials) and stored through an RPC;
it is never printed, logged or kept anywhere else.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mdame_core import settings
from mdame_core.state import Account, StateStore
from mdame_domain.credentials import (
    MASTER_KEY_FILE_VAR,
    MASTER_KEY_VAR,
    CredentialError,
    Envelope,
    MasterKey,
    associated_data,
    load_master_key,
    rewrap,
    seal_grant,
    write_key_file,
)

CLIENT_SECRETS_VAR = "MDAME_YOUTUBE_CLIENT_SECRETS"
TOKEN_URI_VAR = "MDAME_GOOGLE_TOKEN_URI"
SCOPES = [
    "https://www.googleapis.com/auth/youtube.upload",
    "https://www.googleapis.com/auth/youtube.readonly",
]


def default_key_file() -> Path:
    return Path(os.environ.get(MASTER_KEY_FILE_VAR) or settings.mdame_home() / "master.key")


def master_key(create: bool) -> MasterKey:
    """The master key; with `create`, a new 0600 key file when neither source exists yet."""
    path = default_key_file()
    if create and not os.environ.get(MASTER_KEY_VAR) and not path.exists():
        write_key_file(path, MasterKey.generate())
        print(f"created master key file {path} (mode 0600): back it up", file=sys.stderr)
    return load_master_key(path)


def _account(state: StateStore, dimension: str, handle: str | None) -> Account:
    accounts = [a for a in state.list_accounts(dimension) if a.platform == "youtube"]
    if handle is not None:
        accounts = [a for a in accounts if a.handle == handle]
    if len(accounts) != 1:
        names = ", ".join(a.handle for a in state.list_accounts(dimension)) or "none"
        raise SystemExit(
            f"mdame: error: name one youtube account of {dimension} with --account "
            f"(its accounts: {names})"
        )
    return accounts[0]


def _flow(client_secrets: str) -> Any:
    from google_auth_oauthlib.flow import InstalledAppFlow

    flow = InstalledAppFlow.from_client_secrets_file(client_secrets, scopes=SCOPES)
    if os.environ.get(TOKEN_URI_VAR):
        flow.client_config["token_uri"] = os.environ[TOKEN_URI_VAR]
    if urlsplit(flow.client_config["token_uri"]).hostname in ("127.0.0.1", "localhost"):
        # oauthlib insists on https; a token endpoint on this host (a local test server) is
        # reached over plain http, never anything beyond it.
        os.environ["OAUTHLIB_INSECURE_TRANSPORT"] = "1"
    return flow


def obtain_refresh_token(client_secrets: str, console: bool, port: int) -> str:
    flow = _flow(client_secrets)
    if not console:
        creds = flow.run_local_server(
            host="127.0.0.1",
            port=port,
            open_browser=True,
            access_type="offline",
            prompt="consent",
        )
    else:
        flow.redirect_uri = f"http://127.0.0.1:{port or 8765}/"
        url, _ = flow.authorization_url(access_type="offline", prompt="consent")
        print(
            f"Open this address in a browser, agree, then paste the address it sent you "
            f"to (it may fail to load; copy it anyway):\n{url}",
            file=sys.stderr,
        )
        answer = sys.stdin.readline().strip()
        code = parse_qs(urlsplit(answer).query).get("code", [answer])[0]
        flow.fetch_token(code=code)
        creds = flow.credentials
    if not creds.refresh_token:
        raise RuntimeError("Google returned no refresh token (consent was not offline)")
    return str(creds.refresh_token)


def connect(args: argparse.Namespace) -> int:
    env = settings.mdame_env()
    secrets = args.client_secrets or os.environ.get(CLIENT_SECRETS_VAR)
    if not secrets:
        raise SystemExit(f"mdame: error: set {CLIENT_SECRETS_VAR} or pass --client-secrets")
    key = master_key(create=True)
    with StateStore() as state:
        account = _account(state, args.dimension, args.account)
        refresh_token = obtain_refresh_token(secrets, args.console, args.port)
        envelope = seal_grant(
            key,
            associated_data(env, account.platform, account.handle),
            {"refresh_token": refresh_token},
        )
        del refresh_token
        state.store_account_credential(
            account.id, envelope.key_id, envelope.wrapped_key, envelope.ciphertext
        )
    print(
        f"connected {account.platform}:{account.handle} ({args.dimension}); grant stored "
        f"encrypted under master key {envelope.key_id}"
    )
    return 0


def list_accounts(args: argparse.Namespace) -> int:
    with StateStore() as state:
        dims = [d.slug for d in state.list_dimensions()]
        print(f"{'dimension':<12} {'platform':<9} {'handle':<24} {'active':<6} {'grant':<6} state")
        for slug in dims:
            for a in state.list_accounts(slug):
                st = state.account_status(a.id)
                if st.needs_reauth:
                    what = "needs_reauth"
                elif st.paused_until is not None and st.paused_until > state.db_now():
                    what = f"paused until {st.paused_until:%Y-%m-%d %H:%M%z} ({st.pause_reason})"
                else:
                    what = "ok"
                print(
                    f"{slug:<12} {a.platform:<9} {a.handle:<24} {str(a.active).lower():<6} "
                    f"{'yes' if st.has_credential else 'no':<6} {what}"
                )
    return 0


def rotate_keys(args: argparse.Namespace) -> int:
    """Re-wraps every data key under a new master key, all in one RPC. The new key is written
    (0600) before the database changes, so no crash can leave a data key wrapped by a key that
    exists nowhere."""
    env = settings.mdame_env()
    old = master_key(create=False)
    new = MasterKey.generate()
    from_env = bool(os.environ.get(MASTER_KEY_VAR))
    target = Path(args.new_key_file) if args.new_key_file else default_key_file()
    if from_env and not args.new_key_file:
        raise SystemExit(
            f"mdame: error: the master key comes from {MASTER_KEY_VAR}: pass --new-key-file "
            "PATH for the new one, then put its content in the variable"
        )
    pending = target.with_name(target.name + ".new")
    write_key_file(pending, new)
    with StateStore() as state:
        items = []
        for account, key_id, wrapped, ciphertext in state.stored_credentials():
            if key_id != old.key_id:
                raise CredentialError(
                    f"account {account.handle}'s data key is wrapped by {key_id}, not by the "
                    f"current master key {old.key_id}"
                )
            aad = associated_data(env, account.platform, account.handle)
            moved = rewrap(old, new, aad, Envelope(key_id, wrapped, ciphertext))
            items.append(
                {
                    "account_id": account.id,
                    "wrapped_key": base64.b64encode(moved.wrapped_key).decode(),
                }
            )
        count = state.rewrap_account_credentials(old.key_id, new.key_id, items)
    os.replace(pending, target)
    print(f"re-wrapped {count} data keys: master key {old.key_id} -> {new.key_id} ({target})")
    if from_env:
        print(f"set {MASTER_KEY_VAR} to the content of {target} before the next run")
    return 0


def add_parsers(groups: Any) -> None:
    accounts = groups.add_parser("accounts", help="publishing accounts and their grants")
    commands = accounts.add_subparsers(dest="command", required=True)
    conn = commands.add_parser("connect", help="authorise a YouTube channel (OAuth)")
    conn.add_argument("dimension")
    conn.add_argument("--account", help="the account's handle (when the dimension has several)")
    conn.add_argument("--client-secrets", help=f"OAuth client JSON (default ${CLIENT_SECRETS_VAR})")
    conn.add_argument("--console", action="store_true", help="headless: paste the redirect")
    conn.add_argument("--port", type=int, default=0, help="loopback port (0: any free one)")
    conn.set_defaults(func=connect)
    commands.add_parser("list", help="accounts, grants and needs_reauth").set_defaults(
        func=list_accounts
    )
    keys = groups.add_parser("keys", help="the master key of the credential envelopes")
    kcommands = keys.add_subparsers(dest="command", required=True)
    rot = kcommands.add_parser("rotate", help="re-wrap every data key under a new master key")
    rot.add_argument("--new-key-file", help="where to write the new key (default: the key file)")
    rot.set_defaults(func=rotate_keys)
