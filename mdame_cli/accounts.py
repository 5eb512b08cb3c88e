"""`mdame accounts connect|list` and `mdame keys rotate`: channel grants, stored encrypted.

connect runs Google's installed-app OAuth flow (google-auth-oauthlib) for the upload and
read-only scopes: a loopback redirect on 127.0.0.1, or with --console (headless hosts) the
consent URL is printed and the address the browser was sent back to is pasted in. With
--platform tiktok or instagram it runs that platform's flow instead (consent.py). The grant is
sealed in an AES-256-GCM envelope (mdame_domain.credentials) and stored through an RPC; it is
never printed, logged or kept anywhere else.

Both commands act as the admin role. The database records the current master key: a grant
sealed under another key is refused, so a connect whose key was rotated during its consent flow
loads the key again and seals anew, and a rotation replaces only the data keys it read.
"""

from __future__ import annotations

import argparse
import base64
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

from mdame_core import settings
from mdame_core.state import Account, MasterKeyState, StateConflict, StateError, StateStore
from mdame_domain.credentials import (
    KEY_GRACE_VAR,
    MASTER_KEY_FILE_VAR,
    MASTER_KEY_VAR,
    PREVIOUS_KEY_VAR,
    CredentialError,
    Envelope,
    KeyRing,
    MasterKey,
    associated_data,
    key_grace_s,
    load_master_key,
    load_master_keys,
    previous_key_file,
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
    return Path(settings.get(MASTER_KEY_FILE_VAR) or settings.mdame_home() / "master.key")


def master_key(create: bool) -> MasterKey:
    """The master key; with `create`, a new 0600 key file when neither source exists yet."""
    path = default_key_file()
    if create and not settings.is_set(MASTER_KEY_VAR) and not path.exists():
        write_key_file(path, MasterKey.generate())
        print(f"created master key file {path} (mode 0600): back it up", file=sys.stderr)
    return load_master_key(path)


def _key_here() -> bool:
    return settings.is_set(MASTER_KEY_VAR) or default_key_file().exists()


def _key_source() -> str:
    return (
        MASTER_KEY_VAR if settings.is_set(MASTER_KEY_VAR) else f"the key file {default_key_file()}"
    )


def _not_current(recorded: MasterKeyState, key: MasterKey) -> str | None:
    """Why `key` may not seal or rotate grants now (None: it is the database's current key, or
    no grant was stored yet)."""
    if recorded.current_key_id in (None, key.key_id):
        return None
    replaced = (
        f" (it replaced {key.key_id} at {recorded.rotated_at:%Y-%m-%d %H:%M:%S%z})"
        if recorded.previous_key_id == key.key_id and recorded.rotated_at is not None
        else ""
    )
    return (
        f"the current master key is {recorded.current_key_id}{replaced}, not {key.key_id} from "
        f"{_key_source()}: put the current key there and run the command again"
    )


def _account(state: StateStore, dimension: str, handle: str | None, platform: str) -> Account:
    """The dimension's one account of `platform`, or the one named `handle`."""
    accounts = [a for a in state.list_accounts(dimension) if a.platform == platform]
    if handle is not None:
        accounts = [a for a in accounts if a.handle == handle]
    if len(accounts) != 1:
        names = (
            ", ".join(f"{a.platform}:{a.handle}" for a in state.list_accounts(dimension)) or "none"
        )
        raise SystemExit(
            f"mdame: error: name one {platform} account of {dimension} with --account "
            f"(its accounts: {names})"
        )
    return accounts[0]


def _flow(client_secrets: str) -> Any:
    from google_auth_oauthlib.flow import InstalledAppFlow

    flow = InstalledAppFlow.from_client_secrets_file(client_secrets, scopes=SCOPES)
    token_uri = settings.get(TOKEN_URI_VAR)
    if token_uri:
        flow.client_config["token_uri"] = token_uri
    if urlsplit(flow.client_config["token_uri"]).hostname in ("127.0.0.1", "localhost"):
        # oauthlib insists on https; a token endpoint on this host (a local test server) is
        # reached over plain http, never anything beyond it.
        settings.set_variable("OAUTHLIB_INSECURE_TRANSPORT", "1")
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


def _grant(args: argparse.Namespace) -> dict[str, object]:
    """The platform's consent flow: the grant to seal (its refresh token or long-lived token)."""
    from mdame_cli.consent import ConsentError, instagram_grant, tiktok_grant

    try:
        if args.platform == "tiktok":
            return tiktok_grant(args.console, args.port)
        if args.platform == "instagram":
            if not args.redirect_uri:
                raise ConsentError(
                    "pass --redirect-uri: the https redirect URI registered in the Instagram app"
                )
            return instagram_grant(args.redirect_uri)
    except ConsentError as exc:
        raise SystemExit(f"mdame: error: {exc}; nothing was stored") from None
    secrets = args.client_secrets or settings.get(CLIENT_SECRETS_VAR)
    return {"refresh_token": obtain_refresh_token(str(secrets), args.console, args.port)}


def connect(args: argparse.Namespace) -> int:
    env = settings.mdame_env()
    if args.platform == "youtube" and not (args.client_secrets or settings.get(CLIENT_SECRETS_VAR)):
        raise SystemExit(f"mdame: error: set {CLIENT_SECRETS_VAR} or pass --client-secrets")
    with StateStore(role="admin") as state:
        account = _account(state, args.dimension, args.account, args.platform)
        recorded = state.master_key_state()
        # A new key file only for a database with no grant yet; otherwise its grants' key must
        # be here, and is checked before the consent flow (a grant under another key is refused).
        if recorded.current_key_id is not None and not _key_here():
            raise SystemExit(
                f"mdame: error: the database's grants are under master key "
                f"{recorded.current_key_id}: put that key in {MASTER_KEY_VAR} or "
                f"{default_key_file()} (mode 0600)"
            )
        key = master_key(create=True)
        stale = _not_current(recorded, key)
        if stale is not None:
            raise SystemExit(f"mdame: error: {stale}")
        grant = _grant(args)
        aad = associated_data(env, account.key_platform, account.handle)
        envelope = _store_sealed(state, account, aad, grant, key)
        del grant
    print(
        f"connected {account.platform}:{account.handle} ({args.dimension}); grant stored "
        f"encrypted under master key {envelope.key_id}"
    )
    return 0


def _store_sealed(
    state: StateStore, account: Account, aad: bytes, grant: dict[str, object], key: MasterKey
) -> Envelope:
    """Seals `grant` under `key` and stores it. The consent flow takes minutes: when a rotation
    replaced `key` meanwhile, the store is refused, and the grant (still in memory) is sealed
    again under the key loaded anew. A key file is installed right after the rotation commits,
    so a reload that still finds the old key waits a moment first."""
    for attempt in range(6):
        envelope = seal_grant(key, aad, grant)
        try:
            state.store_account_credential(
                account.id, envelope.key_id, envelope.wrapped_key, envelope.ciphertext
            )
            return envelope
        except StateConflict as exc:
            refused = exc
        fresh = master_key(create=False)
        if fresh.key_id != key.key_id:
            print(
                f"master key {key.key_id} was replaced by {fresh.key_id} while the channel was "
                f"being authorised: sealing the grant again under {fresh.key_id}",
                file=sys.stderr,
            )
            key = fresh
        elif settings.is_set(MASTER_KEY_VAR) or attempt == 5:
            break
        else:
            time.sleep(0.5)
    raise SystemExit(
        f"mdame: error: {refused.message}; nothing was stored: run `mdame accounts connect "
        f"{_dimension_of(state, account)} --account {account.handle}` again with the current key"
    )


def _dimension_of(state: StateStore, account: Account) -> str:
    slugs = {d.id: d.slug for d in state.list_dimensions()}
    return slugs.get(account.dimension_id, str(account.dimension_id))


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
    """Re-wraps every data key under a new master key and makes it the database's current one.

    The new key is written (0600, under a name of its own) before the database changes, so no
    crash can leave a data key wrapped by a key that exists nowhere, and a rotation that loses a
    race to another leaves the winner's key file alone. The replaced key is kept in the key
    file's `.previous` (0600) for readers during the grace period. A grant stored while the
    rotation ran is re-read and re-wrapped in a second pass."""
    env = settings.mdame_env()
    grace = key_grace_s()  # a bad setting is refused before anything changes
    keys = load_master_keys(default_key_file())
    old, new = keys.current, MasterKey.generate()
    from_env = settings.is_set(MASTER_KEY_VAR)
    target = Path(args.new_key_file) if args.new_key_file else default_key_file()
    if from_env and not args.new_key_file:
        raise SystemExit(
            f"mdame: error: the master key comes from {MASTER_KEY_VAR}: pass --new-key-file "
            "PATH for the new one, then put its content in the variable"
        )
    with StateStore(role="admin") as state:
        stale = _not_current(state.master_key_state(), old)
        if stale is not None:
            raise SystemExit(f"mdame: error: {stale}")
        slugs = {d.id: d.slug for d in state.list_dimensions()}
        items, unknown = _rewrapped(state.stored_credentials(), keys, new, env)
        if unknown:
            raise SystemExit(
                "mdame: error: nothing was rotated: these grants are wrapped by a master key "
                f"this command does not have: {_names(unknown, slugs)}; put that key in "
                f"{PREVIOUS_KEY_VAR} (or {previous_key_file(default_key_file())}), or connect "
                "those accounts again"
            )
        pending = target.with_name(f"{target.name}.{new.key_id}.new")
        write_key_file(pending, new)
        try:
            left = state.rewrap_account_credentials(old.key_id, new.key_id, items)
        except StateError as exc:
            pending.unlink(missing_ok=True)  # refused: the database did not change
            raise SystemExit(f"mdame: error: {exc.message}; nothing was rotated") from None
        except BaseException:
            print(
                f"mdame: the rotation's outcome is unknown: if the database's current master "
                f"key is {new.key_id}, it is in {pending}",
                file=sys.stderr,
            )
            raise
        previous = previous_key_file(target)
        write_key_file(previous, old)
        os.replace(pending, target)
        # What changed after it was read (a connect storing a grant) was left as it was: read it
        # again and re-wrap it. Once the new key is current nothing can be stored under the old.
        retried: list[Account] = []
        for _ in range(3):
            if not left:
                break
            wanted = {account_id for account_id, _ in left}
            rows = [r for r in state.stored_credentials() if r[0].id in wanted]
            retried += [r[0] for r in rows if r[0] not in retried]
            items, unknown = _rewrapped(rows, keys, new, env)
            left = state.rewrap_account_credentials(old.key_id, new.key_id, items)
        final = state.stored_credentials()
        moved = sum(1 for r in final if r[1] == new.key_id)
        stranded = [r[0] for r in final if r[1] != new.key_id]
    print(f"re-wrapped {moved} data keys: master key {old.key_id} -> {new.key_id} ({target})")
    if retried:
        print(
            f"re-read and re-wrapped again (changed during the rotation): {_names(retried, slugs)}"
        )
    print(
        f"the replaced key {old.key_id} is kept in {previous} (mode 0600); readers that still "
        f"have it open grants for {grace:g} s ({KEY_GRACE_VAR})"
    )
    if from_env:
        print(
            f"set {MASTER_KEY_VAR} to the content of {target} (and {PREVIOUS_KEY_VAR} to that of "
            f"{previous}) and redeploy within {grace:g} s"
        )
    if stranded:
        print(
            f"mdame: error: still not under {new.key_id}: {_names(stranded, slugs)}; run `mdame "
            "accounts connect DIMENSION --account HANDLE` for each",
            file=sys.stderr,
        )
        return 1
    return 0


def _rewrapped(
    rows: Sequence[tuple[Account, str, bytes, bytes]], keys: KeyRing, new: MasterKey, env: str
) -> tuple[list[dict[str, Any]], list[Account]]:
    """The rotation's items for `rows` (each with the wrapped key it replaces, for the
    compare-and-swap), and the accounts whose data key none of `keys` wraps. A row already
    under `new` is left out."""
    have = keys.by_id()
    items: list[dict[str, Any]] = []
    unknown: list[Account] = []
    for account, key_id, wrapped, ciphertext in rows:
        if key_id == new.key_id:
            continue
        if key_id not in have:
            unknown.append(account)
            continue
        aad = associated_data(env, account.key_platform, account.handle)
        try:
            moved = rewrap(have[key_id], new, aad, Envelope(key_id, wrapped, ciphertext))
        except CredentialError as exc:
            raise CredentialError(f"account {account.handle}: {exc}") from None
        items.append(
            {
                "account_id": account.id,
                "key_id": key_id,
                "expected_wrapped_key": base64.b64encode(wrapped).decode(),
                "wrapped_key": base64.b64encode(moved.wrapped_key).decode(),
            }
        )
    return items, unknown


def _names(accounts: Sequence[Account], slugs: dict[int, str]) -> str:
    return ", ".join(f"{slugs.get(a.dimension_id, a.dimension_id)}/{a.handle}" for a in accounts)


def add_parsers(groups: Any) -> None:
    accounts = groups.add_parser("accounts", help="publishing accounts and their grants")
    commands = accounts.add_subparsers(dest="command", required=True)
    conn = commands.add_parser(
        "connect", help="authorise a YouTube channel, TikTok creator or Instagram account"
    )
    conn.add_argument("dimension")
    conn.add_argument(
        "--platform",
        choices=("youtube", "tiktok", "instagram"),
        default="youtube",
        help="whose consent flow (default youtube)",
    )
    conn.add_argument(
        "--redirect-uri", help="instagram: the https redirect URI registered in the app"
    )
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
