"""Channel credentials at rest: an AES-256-GCM envelope.

Each account's grant is encrypted with its own random data key; the data key is wrapped
(AES-256-GCM again) by the master key. The associated data binds both ciphertexts to the
account and the environment, so a row copied to another account or from dev to prod does not
decrypt. Rotating the master key re-wraps the data keys only. Nothing here logs or echoes a
key or a plaintext: errors name what failed, never the value.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

MASTER_KEY_VAR = "MDAME_MASTER_KEY"
MASTER_KEY_FILE_VAR = "MDAME_MASTER_KEY_FILE"
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
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(key.encoded() + "\n")
    os.replace(tmp, path)


def load_master_key(default_file: Path) -> MasterKey:
    """MDAME_MASTER_KEY (base64 of 32 bytes) or else the 0600 key file
    (MDAME_MASTER_KEY_FILE, default `default_file`)."""
    text = os.environ.get(MASTER_KEY_VAR)
    if text:
        return MasterKey.parse(text, MASTER_KEY_VAR)
    return read_key_file(Path(os.environ.get(MASTER_KEY_FILE_VAR) or default_file))


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
