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
    StoredGrant,
    associated_data,
    key_grace_s,
    load_master_keys,
    open_stored_grant,
    reseal_stored_grant,
)
from mdame_resources.providers.publisher.job import AccountUnavailable


def master_keys(master_key_file: str) -> KeyRing:
    """The current key and the one a rotation replaced: a reader not yet redeployed after a
    rotation keeps working for the grace period."""
    return load_master_keys(
        Path(master_key_file) if master_key_file else mdame_home() / "master.key"
    )


def _aad(account: Account) -> bytes:
    return associated_data(mdame_env(), account.key_platform, account.handle)


def open_account_grant(stored: Any, account: Account, master_key_file: str) -> dict[str, Any]:
    """The account's stored grant (a StoredCredential), decrypted in memory."""
    return open_stored_grant(
        master_keys(master_key_file), _aad(account), stored.grant(), key_grace_s()
    )


@dataclass
class AccountGrant:
    """An account's grant as a channel uses it: the refresh token, and what replacing it
    needs (the stored grant it was opened from)."""

    refresh_token: str
    stored: StoredGrant
    issued_at: float | None = None  # when the token was issued, where the grant says

    @property
    def ciphertext(self) -> bytes:
        return self.stored.envelope.ciphertext


# The platforms whose consent flow `mdame accounts connect` runs with --platform; YouTube's is
# the default one.
PLATFORM_FLOWS = ("tiktok", "instagram")


def reconnect_command(platform: str, dimension_slug: str, handle: str) -> str:
    """The command that connects the account again, in backticks."""
    flag = f" --platform {platform}" if platform in PLATFORM_FLOWS else ""
    return f"`mdame accounts connect {dimension_slug}{flag} --account {handle}`"


def account_grant(
    state: StateStore, account: Account, dimension_slug: str, master_key_file: str
) -> AccountGrant:
    """The account's grant, or AccountUnavailable naming the fix."""
    reconnect = reconnect_command(account.platform, dimension_slug, account.handle)
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
    return AccountGrant(str(grant["refresh_token"]), stored.grant(), issued_at)


def store_rotated_grant(
    state: StateStore,
    account: Account,
    grant: AccountGrant,
    refresh_token: str,
    master_key_file: str,
    issued_at: float | None = None,
) -> bool:
    """Seals the provider's new refresh token (and when it was issued, for a provider whose
    tokens may be refreshed only at some age) under the data key of the stored grant it was
    refreshed from, and replaces that grant (fenced; False when it changed meanwhile). The data
    key's wrapped copies stay as stored: the database's current master key wraps it even when
    this process still runs the key a rotation replaced, so a token the provider will not take
    back (TikTok retires the old one) is never lost for want of the new key."""
    grant_data: dict[str, Any] = {"refresh_token": refresh_token}
    if issued_at is not None:
        grant_data["issued_at"] = issued_at
    resealed = reseal_stored_grant(
        master_keys(master_key_file), _aad(account), grant.stored, grant_data, key_grace_s()
    )
    sealed = resealed.envelope
    replaced = state.replace_rotated_credential(
        account.id, sealed.key_id, sealed.wrapped_key, sealed.ciphertext, grant.ciphertext
    )
    if replaced:
        grant.refresh_token, grant.stored, grant.issued_at = refresh_token, resealed, issued_at
    return replaced
