"""Channel credentials at rest: an AES-256-GCM envelope.

Each account's grant is encrypted with its own random data key; the data key is wrapped
(AES-256-GCM again) by the master key. The associated data binds both ciphertexts to the
account and the environment, so a row copied to another account or from dev to prod does not
decrypt. Rotating the master key re-wraps the data keys only. Nothing here logs or echoes a
key or a plaintext: errors name what failed, never the value.

After a rotation each re-wrapped grant also keeps its data key wrapped by the replaced key, so a
reader that still has that key (not redeployed yet) opens it for a grace period
(MDAME_KEY_GRACE_S after the rotation); a reader with the new key opens a grant the rotation
could not re-wrap yet with the replaced key (MDAME_MASTER_KEY_PREVIOUS, or the key file's
`.previous` that `mdame keys rotate` keeps).

A grant a provider rotates (TikTok's refresh token, Instagram's long-lived token) is sealed back
under the data key of the grant it replaces (`reseal_stored_grant`): its wrapped copies stay as
they are, so the new grant is under the keys the database expects, and a process not yet
redeployed after a rotation (which lacks the current key) stores it all the same.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from mdame_core import settings

MASTER_KEY_VAR = "MDAME_MASTER_KEY"
MASTER_KEY_FILE_VAR = "MDAME_MASTER_KEY_FILE"
PREVIOUS_KEY_VAR = "MDAME_MASTER_KEY_PREVIOUS"
KEY_GRACE_VAR = "MDAME_KEY_GRACE_S"
DEFAULT_KEY_GRACE_S: float = settings.default(KEY_GRACE_VAR)
NONCE = 12


class CredentialError(Exception):
    """A key or envelope problem; the message never contains key material or plaintext."""


@dataclass(frozen=True, repr=False)
class MasterKey:
    key: bytes

    @property
    def key_id(self) -> str:
        return hashlib.sha256(b"mdame-master-key-id:" + self.key).hexdigest()[:16]

    def __repr__(self) -> str:  # never the key itself
        return f"MasterKey(id={self.key_id})"

    def encoded(self) -> str:
        return base64.b64encode(self.key).decode()

    @classmethod
    def generate(cls) -> MasterKey:
        return cls(AESGCM.generate_key(bit_length=256))

    @classmethod
    def parse(cls, text: str, source: str) -> MasterKey:
        try:
            raw = base64.b64decode(text.strip(), validate=True)
        except (binascii.Error, ValueError):
            raise CredentialError(f"{source} is not base64") from None
        if len(raw) != 32:
            raise CredentialError(f"{source} must decode to 32 bytes (AES-256), not {len(raw)}")
        return cls(raw)


def read_key_file(path: Path) -> MasterKey:
    """The master key in `path`, refused unless only its owner may read it (mode 0600)."""
    try:
        mode = stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        raise CredentialError(f"master key file {path} does not exist") from None
    if mode & 0o077:
        raise CredentialError(f"master key file {path} has mode {mode:o}; it must be 0600")
    return MasterKey.parse(path.read_text(), f"master key file {path}")


def write_key_file(path: Path, key: MasterKey) -> None:
    """Writes `key` to `path` with mode 0600 from the start (never readable by others)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.encoded() + "\n")
    os.replace(tmp, path)


def key_file(default_file: Path) -> Path:
    """The key file in use: MDAME_MASTER_KEY_FILE, default `default_file`."""
    return Path(settings.raw(MASTER_KEY_FILE_VAR) or default_file)


def previous_key_file(path: Path) -> Path:
    """Where `mdame keys rotate` keeps the key it replaced in `path` (0600)."""
    return path.with_name(path.name + ".previous")


def load_master_key(default_file: Path) -> MasterKey:
    """MDAME_MASTER_KEY (base64 of 32 bytes) or else the 0600 key file
    (MDAME_MASTER_KEY_FILE, default `default_file`)."""
    text = settings.get(MASTER_KEY_VAR)
    if text:
        return MasterKey.parse(text, MASTER_KEY_VAR)
    return read_key_file(key_file(default_file))


@dataclass(frozen=True, repr=False)
class KeyRing:
    """The master key a process seals and opens with, and the one it replaced, if known."""

    current: MasterKey
    previous: MasterKey | None = None

    def __repr__(self) -> str:
        return f"KeyRing(current={self.current!r}, previous={self.previous!r})"

    def by_id(self) -> dict[str, MasterKey]:
        keys = [self.current] if self.previous is None else [self.previous, self.current]
        return {k.key_id: k for k in keys}


def load_master_keys(default_file: Path) -> KeyRing:
    """load_master_key's key, with the previous one from MDAME_MASTER_KEY_PREVIOUS or else the
    key file's `.previous` (0600), when there is one."""
    current = load_master_key(default_file)
    text = settings.get(PREVIOUS_KEY_VAR)
    previous: MasterKey | None = None
    if text:
        previous = MasterKey.parse(text, PREVIOUS_KEY_VAR)
    else:
        path = previous_key_file(key_file(default_file))
        if path.exists():
            previous = read_key_file(path)
    return KeyRing(current, None if previous == current else previous)


def key_grace_s() -> float:
    """How long after a rotation the replaced key still opens grants (MDAME_KEY_GRACE_S,
    seconds, default 7 days)."""
    try:
        return float(settings.get(KEY_GRACE_VAR))
    except settings.SettingsError as exc:
        raise CredentialError(str(exc)) from None


def associated_data(env: str, platform: str, handle: str) -> bytes:
    return f"mdame/credential/v1|env={env}|account={platform}:{handle}".encode()


@dataclass(frozen=True, repr=False)
class Envelope:
    key_id: str
    wrapped_key: bytes  # nonce + AES-GCM(master, data key)
    ciphertext: bytes  # nonce + AES-GCM(data key, grant JSON)

    def __repr__(self) -> str:
        return f"Envelope(key_id={self.key_id})"


def _seal(key: bytes, plaintext: bytes, aad: bytes) -> bytes:
    nonce = os.urandom(NONCE)
    return nonce + AESGCM(key).encrypt(nonce, plaintext, aad)


def _open(key: bytes, sealed: bytes, aad: bytes, what: str) -> bytes:
    try:
        return AESGCM(key).decrypt(sealed[:NONCE], sealed[NONCE:], aad)
    except (InvalidTag, ValueError):
        raise CredentialError(
            f"{what} does not decrypt: another master key, account or environment"
        ) from None


def seal_grant(master: MasterKey, aad: bytes, grant: dict[str, object]) -> Envelope:
    data_key = AESGCM.generate_key(bit_length=256)
    ciphertext = _seal(data_key, json.dumps(grant, sort_keys=True).encode(), aad)
    return Envelope(master.key_id, _seal(master.key, data_key, aad + b"|data-key"), ciphertext)


def open_grant(master: MasterKey, aad: bytes, envelope: Envelope) -> dict[str, object]:
    if envelope.key_id != master.key_id:
        raise CredentialError(
            f"the data key is wrapped by master key {envelope.key_id}, not {master.key_id}"
        )
    data_key = _open(master.key, envelope.wrapped_key, aad + b"|data-key", "the data key")
    grant = json.loads(_open(data_key, envelope.ciphertext, aad, "the grant"))
    if not isinstance(grant, dict):
        raise CredentialError("the grant is not an object")
    return grant


def rewrap(old: MasterKey, new: MasterKey, aad: bytes, envelope: Envelope) -> Envelope:
    """The same envelope with its data key wrapped by `new` (the ciphertext is unchanged)."""
    data_key = _open(old.key, envelope.wrapped_key, aad + b"|data-key", "the data key")
    return Envelope(new.key_id, _seal(new.key, data_key, aad + b"|data-key"), envelope.ciphertext)


@dataclass(frozen=True, repr=False)
class StoredGrant:
    """A stored grant as a reader finds it: its envelope, the same data key wrapped by the master
    key the last rotation replaced (None: the grant was stored or re-wrapped since), when that
    rotation happened, and the database's clock at the read."""

    envelope: Envelope
    previous: Envelope | None
    rotated_at: datetime | None
    read_at: datetime

    def __repr__(self) -> str:
        previous = None if self.previous is None else self.previous.key_id
        return f"StoredGrant(key_id={self.envelope.key_id}, previous_key_id={previous})"

    @classmethod
    def of(
        cls,
        key_id: str,
        wrapped_key: bytes,
        ciphertext: bytes,
        previous_key_id: str | None,
        previous_wrapped_key: bytes | None,
        rotated_at: datetime | None,
        read_at: datetime,
    ) -> StoredGrant:
        previous = None
        if previous_key_id is not None and previous_wrapped_key is not None:
            previous = Envelope(previous_key_id, previous_wrapped_key, ciphertext)
        return cls(Envelope(key_id, wrapped_key, ciphertext), previous, rotated_at, read_at)


def _usable(keys: KeyRing, stored: StoredGrant, grace_s: float) -> tuple[MasterKey, Envelope]:
    """The master key among `keys` that opens `stored`, with the envelope it opens: the copy
    wrapped by the replaced master key only until `grace_s` after the rotation (by the
    database's clock). CredentialError naming the fix when there is none."""
    mine = keys.by_id()
    envelope = stored.envelope
    if envelope.key_id in mine:
        return mine[envelope.key_id], envelope
    previous = stored.previous
    if previous is not None and previous.key_id in mine:
        rotated = stored.rotated_at
        if rotated is not None and stored.read_at <= rotated + timedelta(seconds=grace_s):
            return mine[previous.key_id], previous
        when = "" if rotated is None else f" at {rotated:%Y-%m-%d %H:%M:%S%z}"
        raise CredentialError(
            f"master key {previous.key_id} was replaced by {envelope.key_id}{when}, and the "
            f"{grace_s:g} s ({KEY_GRACE_VAR}) it is still accepted for have passed: redeploy "
            f"with the new master key ({MASTER_KEY_VAR} or the key file)"
        )
    have = " or ".join(mine)
    raise CredentialError(
        f"the data key is wrapped by master key {envelope.key_id}, not by {have}: load that key "
        f"({MASTER_KEY_VAR} or the key file; {PREVIOUS_KEY_VAR} for the one a rotation replaced)"
    )


def open_stored_grant(
    keys: KeyRing, aad: bytes, stored: StoredGrant, grace_s: float
) -> dict[str, object]:
    """The grant, opened with whichever of `keys` wraps its data key; the copy wrapped by the
    replaced master key only until `grace_s` after the rotation (by the database's clock)."""
    master, envelope = _usable(keys, stored, grace_s)
    return open_grant(master, aad, envelope)


def reseal_stored_grant(
    keys: KeyRing, aad: bytes, stored: StoredGrant, grant: dict[str, object], grace_s: float
) -> StoredGrant:
    """`stored` with `grant` in place of its grant, sealed under the same data key (opened as
    open_stored_grant opens it), whose wrapped copies are kept as they are: by the master key
    the database holds current (or the one a rotation has still to re-wrap it from), and by the
    key the rotation replaced while that copy is kept. So a process without the current key
    can store it. Random 96-bit nonces keep AES-GCM safe far beyond the few thousand grants a
    data key may seal over the years."""
    master, envelope = _usable(keys, stored, grace_s)
    data_key = _open(master.key, envelope.wrapped_key, aad + b"|data-key", "the data key")
    ciphertext = _seal(data_key, json.dumps(grant, sort_keys=True).encode(), aad)
    previous = stored.previous
    return replace(
        stored,
        envelope=replace(stored.envelope, ciphertext=ciphertext),
        previous=None if previous is None else replace(previous, ciphertext=ciphertext),
    )
