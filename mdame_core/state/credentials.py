"""Stored account credentials: grants kept as ciphertext under a data key wrapped by the master
key, and the rotation of that key."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg.types.json import Jsonb

from mdame_core.state.client import ClientBase, JsonObject
from mdame_core.state.errors import NotFound
from mdame_core.state.records import Account, MasterKeyState, StoredCredential


class Credentials(ClientBase):
    """The credential RPCs and reads."""

    def store_account_credential(
        self, account_id: int, key_id: str, wrapped_key: bytes, ciphertext: bytes
    ) -> int:
        return self._scalar("store_account_credential", account_id, key_id, wrapped_key, ciphertext)

    def replace_rotated_credential(
        self,
        account_id: int,
        key_id: str,
        wrapped_key: bytes,
        ciphertext: bytes,
        expected_ciphertext: bytes,
    ) -> bool:
        """Replaces the account's grant with the one a rotating provider answered a refresh
        with, while the stored grant is still `expected_ciphertext` (fenced). False: the stored
        grant changed meanwhile and stays."""
        return bool(
            self._scalar(
                "replace_rotated_credential",
                account_id,
                key_id,
                wrapped_key,
                ciphertext,
                expected_ciphertext,
                self._token(),
            )
        )

    def rewrap_account_credentials(
        self, old_key_id: str, new_key_id: str, items: Sequence[JsonObject]
    ) -> list[tuple[int, str]]:
        """One pass of a rotation (items: account_id, key_id and expected_wrapped_key as read,
        wrapped_key re-wrapped; base64). Returns (account_id, key_id) of the grants still not
        under the new key: changed since they were read, or not listed. StateConflict: the
        current master key is neither old_key_id nor, after this rotation's first pass,
        new_key_id."""
        rows = self.call("rewrap_account_credentials", old_key_id, new_key_id, Jsonb(list(items)))
        return [(account_id, key_id) for account_id, key_id in rows]

    def master_key_state(self) -> MasterKeyState:
        rows = self._select(
            """SELECT current_key_id, previous_key_id, rotated_at, now() FROM mdame.master_keys"""
        )
        if not rows:
            raise NotFound("master_key_state", "mdame.master_keys has no row: migrate")
        return MasterKeyState(*rows[0])

    def account_grant(self, account_id: int) -> StoredCredential | None:
        """The account's stored grant with the master key record, read together."""
        rows = self._select(
            """SELECT c.key_id, c.wrapped_key, c.ciphertext, c.previous_key_id,
                      c.previous_wrapped_key, k.current_key_id, k.previous_key_id, k.rotated_at,
                      now()
                 FROM mdame.account_credentials c CROSS JOIN mdame.master_keys k
                WHERE c.account_id = %s""",
            [account_id],
        )
        if not rows:
            return None
        r = rows[0]
        previous = None if r[4] is None else bytes(r[4])
        keys = MasterKeyState(r[5], r[6], r[7], r[8])
        return StoredCredential(r[0], bytes(r[1]), bytes(r[2]), r[3], previous, keys)

    def account_credential(self, account_id: int) -> tuple[str, bytes, bytes] | None:
        """(key_id, wrapped_key, ciphertext) of the account's stored grant: ciphertext only."""
        rows = self._select(
            """SELECT key_id, wrapped_key, ciphertext FROM mdame.account_credentials
                WHERE account_id = %s""",
            [account_id],
        )
        return (rows[0][0], bytes(rows[0][1]), bytes(rows[0][2])) if rows else None

    def stored_credentials(self) -> list[tuple[Account, str, bytes, bytes]]:
        """Every stored grant with its account: (account, key_id, wrapped_key, ciphertext)."""
        rows = self._select(
            """SELECT a.id, a.dimension_id, a.platform, a.handle, a.daily_quota_units, a.active,
                      a.quota_timezone, a.daily_insert_calls, a.registered_as, c.key_id,
                      c.wrapped_key, c.ciphertext
                 FROM mdame.account_credentials c
                 JOIN mdame.dimension_accounts a ON a.id = c.account_id ORDER BY a.id"""
        )
        return [(Account(*r[:9]), r[9], bytes(r[10]), bytes(r[11])) for r in rows]
