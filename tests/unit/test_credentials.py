"""The AES-256-GCM envelope of channel credentials."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mdame_domain.credentials import (
    CredentialError,
    Envelope,
    MasterKey,
    associated_data,
    load_master_key,
    open_grant,
    read_key_file,
    rewrap,
    seal_grant,
    write_key_file,
)

GRANT = {"refresh_token": "1//rt-test-not-secret"}
AAD = associated_data("dev", "youtube", "@tech")


def test_a_sealed_grant_opens_only_for_its_account_environment_and_key() -> None:
    key = MasterKey.generate()
    env = seal_grant(key, AAD, GRANT)
    assert open_grant(key, AAD, env) == GRANT
    assert b"rt-test" not in env.ciphertext + env.wrapped_key
    for aad in (
        associated_data("prod", "youtube", "@tech"),
        associated_data("dev", "youtube", "@x"),
    ):
        with pytest.raises(CredentialError, match="does not decrypt"):
            open_grant(key, aad, env)
    with pytest.raises(CredentialError, match="wrapped by master key"):
        open_grant(MasterKey.generate(), AAD, env)
    tampered = Envelope(env.key_id, env.wrapped_key, env.ciphertext[:-1] + b"\0")
    with pytest.raises(CredentialError):
        open_grant(key, AAD, tampered)


def test_rotation_rewraps_the_data_key_and_keeps_the_ciphertext() -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    env = seal_grant(old, AAD, GRANT)
    moved = rewrap(old, new, AAD, env)
    assert moved.ciphertext == env.ciphertext and moved.key_id == new.key_id
    assert open_grant(new, AAD, moved) == GRANT


def test_no_key_material_in_reprs_or_errors() -> None:
    key = MasterKey.generate()
    env = seal_grant(key, AAD, GRANT)
    assert key.encoded() not in repr(key) + repr(env)
    with pytest.raises(CredentialError) as err:
        MasterKey.parse("not base64!", "MDAME_MASTER_KEY")
    assert "not base64!" not in str(err.value)


def test_the_key_file_must_be_0600(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "master.key"
    key = MasterKey.generate()
    write_key_file(path, key)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert read_key_file(path) == key
    monkeypatch.delenv("MDAME_MASTER_KEY", raising=False)
    monkeypatch.delenv("MDAME_MASTER_KEY_FILE", raising=False)
    assert load_master_key(path) == key
    os.chmod(path, 0o644)
    with pytest.raises(CredentialError, match="mode 644"):
        read_key_file(path)
    monkeypatch.setenv("MDAME_MASTER_KEY", key.encoded())
    assert load_master_key(tmp_path / "absent") == key
    monkeypatch.setenv("MDAME_MASTER_KEY", "c2hvcnQ=")
    with pytest.raises(CredentialError, match="32 bytes"):
        load_master_key(path)
