"""The AES-256-GCM envelope of channel credentials."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from mdame_domain.credentials import (
    CredentialError,
    Envelope,
    KeyRing,
    MasterKey,
    StoredGrant,
    associated_data,
    key_grace_s,
    load_master_key,
    load_master_keys,
    open_grant,
    open_stored_grant,
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


ROTATED = datetime(2026, 11, 1, 12, 0, tzinfo=UTC)


def _rotated(old: MasterKey, new: MasterKey, read_after_s: float) -> StoredGrant:
    """A grant re-wrapped from `old` to `new`, with the copy under `old` the rotation keeps."""
    sealed = seal_grant(old, AAD, GRANT)
    moved = rewrap(old, new, AAD, sealed)
    return StoredGrant(moved, sealed, ROTATED, ROTATED + timedelta(seconds=read_after_s))


def test_the_replaced_key_opens_the_kept_copy_during_the_grace_only() -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    assert open_stored_grant(KeyRing(old), AAD, _rotated(old, new, 3599), 3600) == GRANT
    assert open_stored_grant(KeyRing(new), AAD, _rotated(old, new, 10**9), 3600) == GRANT
    with pytest.raises(CredentialError) as late:
        open_stored_grant(KeyRing(old), AAD, _rotated(old, new, 3601), 3600)
    said = str(late.value)
    assert f"master key {old.key_id} was replaced by {new.key_id} at 2026-11-01 12:00:00" in said
    assert "3600 s (MDAME_KEY_GRACE_S)" in said and "redeploy with the new master key" in said
    assert old.encoded() not in said and new.encoded() not in said
    with pytest.raises(CredentialError, match=f"wrapped by master key {new.key_id}"):
        open_stored_grant(KeyRing(MasterKey.generate()), AAD, _rotated(old, new, 0), 3600)


def test_a_grant_still_under_the_replaced_key_opens_with_the_previous_key() -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    stored = StoredGrant(seal_grant(old, AAD, GRANT), None, ROTATED, ROTATED)
    assert open_stored_grant(KeyRing(new, old), AAD, stored, 0) == GRANT
    assert "KeyRing(current=MasterKey(id=" in repr(KeyRing(new, old))
    assert old.encoded() not in repr(KeyRing(new, old)) + repr(stored)


def test_the_previous_key_comes_from_the_environment_or_the_key_files_previous(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old, new = MasterKey.generate(), MasterKey.generate()
    path = tmp_path / "master.key"
    write_key_file(path, new)
    for name in ("MDAME_MASTER_KEY", "MDAME_MASTER_KEY_FILE", "MDAME_MASTER_KEY_PREVIOUS"):
        monkeypatch.delenv(name, raising=False)
    assert load_master_keys(path) == KeyRing(new)
    write_key_file(tmp_path / "master.key.previous", old)
    assert load_master_keys(path) == KeyRing(new, old)
    os.chmod(tmp_path / "master.key.previous", 0o640)
    with pytest.raises(CredentialError, match="master.key.previous has mode 640"):
        load_master_keys(path)
    monkeypatch.setenv("MDAME_MASTER_KEY", old.encoded())
    monkeypatch.setenv("MDAME_MASTER_KEY_PREVIOUS", new.encoded())
    assert load_master_keys(tmp_path / "absent") == KeyRing(old, new)
    monkeypatch.setenv("MDAME_MASTER_KEY_PREVIOUS", "c2hvcnQ=")
    with pytest.raises(CredentialError, match="MDAME_MASTER_KEY_PREVIOUS must decode to 32"):
        load_master_keys(path)


def test_the_grace_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MDAME_KEY_GRACE_S", raising=False)
    assert key_grace_s() == 7 * 24 * 3600
    monkeypatch.setenv("MDAME_KEY_GRACE_S", "90")
    assert key_grace_s() == 90
    for bad in ("-1", "soon", "nan", "inf"):
        monkeypatch.setenv("MDAME_KEY_GRACE_S", bad)
        with pytest.raises(CredentialError, match=f"MDAME_KEY_GRACE_S='{bad}' is not allowed"):
            key_grace_s()
