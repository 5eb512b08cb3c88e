"""An account's sealed grant, opened in memory for a channel, and a rotated one sealed back."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mdame_core.settings import mdame_env, mdame_home
from mdame_core.state import Account, StateStore
from mdame_domain.credentials import (
    CredentialError,
    KeyRing,
    associated_data,
    key_grace_s,
    load_master_keys,
    open_stored_grant,
    seal_grant,
)
from mdame_resources.providers.publisher.job import AccountUnavailable


def master_keys(master_key_file: str) -> KeyRing:
    """The current key and the one a rotation replaced: a reader not yet redeployed after a
    rotation keeps working for the grace period."""
    return load_master_keys(
        Path(master_key_file) if master_key_file else mdame_home() / "master.key"
    )


def open_account_grant(stored: Any, account: Account, master_key_file: str) -> dict[str, Any]:
    """The account's stored grant (a StoredCredential), decrypted in memory."""
    return open_stored_grant(
        master_keys(master_key_file),
        associated_data(mdame_env(), account.platform, account.handle),
        stored.grant(),
        key_grace_s(),
    )


@dataclass
class AccountGrant:
    """An account's grant as a channel uses it: the refresh token, and what replacing it
    needs (the stored ciphertext it was opened from)."""

    refresh_token: str
    ciphertext: bytes
    issued_at: float | None = None  # when the token was issued, where the grant says


def account_grant(
    state: StateStore, account: Account, dimension_slug: str, master_key_file: str
) -> AccountGrant:
    """The account's grant, or AccountUnavailable naming the fix."""
    reconnect = f"`mdame accounts connect {dimension_slug} --account {account.handle}`"
    stored = state.account_grant(account.id)
    if stored is None:
        raise AccountUnavailable(f"account {account.handle} has no stored grant: run {reconnect}")
    try:
        grant = open_account_grant(stored, account, master_key_file)
    except CredentialError as exc:
        raise AccountUnavailable(
            f"account {account.handle}: its stored grant cannot be opened ({exc}); check "
            f"MDAME_MASTER_KEY / MDAME_MASTER_KEY_FILE, or run {reconnect} again"
        ) from None
    issued = grant.get("issued_at")
    issued_at = float(issued) if isinstance(issued, int | float) else None
    return AccountGrant(str(grant["refresh_token"]), stored.ciphertext, issued_at)


def store_rotated_grant(
    state: StateStore,
    account: Account,
    grant: AccountGrant,
    refresh_token: str,
    master_key_file: str,
    issued_at: float | None = None,
) -> bool:
    """Seals the provider's new refresh token (and when it was issued, for a provider whose
    tokens may be refreshed only at some age) under the current master key and replaces the
    stored grant it was refreshed from (fenced; False when that grant changed meanwhile)."""
    grant_data: dict[str, Any] = {"refresh_token": refresh_token}
    if issued_at is not None:
        grant_data["issued_at"] = issued_at
    sealed = seal_grant(
        master_keys(master_key_file).current,
        associated_data(mdame_env(), account.platform, account.handle),
        grant_data,
    )
    replaced = state.replace_rotated_credential(
        account.id, sealed.key_id, sealed.wrapped_key, sealed.ciphertext, grant.ciphertext
    )
    if replaced:
        grant.refresh_token, grant.ciphertext = refresh_token, sealed.ciphertext
        grant.issued_at = issued_at
    return replaced
