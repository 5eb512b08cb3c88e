"""Rotating the master key cannot lose a channel grant.

The database records the current master key (and the one it replaced): a grant sealed under any
other key is refused, a rotation replaces a data key only if it is still the one the rotator
read, a second rotation from the same key is refused, and a reader that still has the replaced
key opens grants during the grace period only. The CLI races are run in this process: the commit
observer runs the competing command right before (or after) the RPC that would be affected.
"""

from __future__ import annotations

import argparse
import base64
import io
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from test_accounts_cli import _consent
from youtube_kit import REFRESH_TOKEN, client_secrets, publisher

from mdame_cli.accounts import connect, rotate_keys
from mdame_core import state as state_module
from mdame_core.state import StateConflict, StateStore
from mdame_domain.credentials import (
    Envelope,
    MasterKey,
    associated_data,
    open_grant,
    read_key_file,
    rewrap,
    seal_grant,
    write_key_file,
)
from mdame_resources.providers.publisher import AccountUnavailable

AAD = associated_data("dev", "youtube", "@tech")


def _account(admin: StateStore, handle: str = "@tech") -> int:
    admin.upsert_dimension("tech", "Tech")
    return admin.upsert_dimension_account("tech", "youtube", handle, 10_000)


def _store(admin: StateStore, account: int, key: MasterKey, token: str = REFRESH_TOKEN) -> None:
    sealed = seal_grant(key, AAD, {"refresh_token": token})
    admin.store_account_credential(account, sealed.key_id, sealed.wrapped_key, sealed.ciphertext)


def _items(
    rows: list[tuple[Any, str, bytes, bytes]], old: MasterKey, new: MasterKey
) -> list[dict[str, Any]]:
    """What a rotator sends for the rows it read: each data key re-wrapped, with the wrapped key
    it replaces (the compare-and-swap's expected value)."""
    b64 = base64.b64encode
    return [
        {
            "account_id": account.id,
            "key_id": key_id,
            "expected_wrapped_key": b64(wrapped).decode(),
            "wrapped_key": b64(
                rewrap(old, new, AAD, Envelope(key_id, wrapped, ct)).wrapped_key
            ).decode(),
        }
        for account, key_id, wrapped, ct in rows
    ]


def _grant(state: StateStore, account: int, key: MasterKey) -> dict[str, object]:
    stored = state.account_credential(account)
    assert stored is not None
    return open_grant(key, AAD, Envelope(*stored))


def test_first_use_records_the_key_and_a_grant_under_another_key_is_refused(state, admin) -> None:
    assert state.master_key_state().current_key_id is None
    a, b = MasterKey.generate(), MasterKey.generate()
    first = _account(admin)
    _store(admin, first, a)
    assert state.master_key_state().current_key_id == a.key_id
    other = admin.upsert_dimension_account("tech", "youtube", "@other", 10_000)
    with pytest.raises(StateConflict, match=f"current master key is {a.key_id}") as refused:
        _store(admin, other, b)
    assert b.encoded() not in str(refused.value) and a.encoded() not in str(refused.value)
    assert state.account_credential(other) is None


def test_a_grant_sealed_under_the_replaced_key_is_refused(state, admin) -> None:
    """A connect that loaded the key before its consent flow, while a rotation ran."""
    account = _account(admin)
    a, b = MasterKey.generate(), MasterKey.generate()
    _store(admin, account, a)
    left = admin.rewrap_account_credentials(
        a.key_id, b.key_id, _items(admin.stored_credentials(), a, b)
    )
    assert left == []
    with pytest.raises(StateConflict, match=f"current master key is {b.key_id}"):
        _store(admin, account, a, token="1//a-later-grant")
    assert _grant(state, account, b) == {"refresh_token": REFRESH_TOKEN}
    keys = state.master_key_state()
    assert (keys.current_key_id, keys.previous_key_id) == (b.key_id, a.key_id)
    assert keys.rotated_at is not None


def test_the_rewrap_leaves_a_row_that_changed_under_it_and_reports_it(state, admin) -> None:
    account = _account(admin)
    a, b = MasterKey.generate(), MasterKey.generate()
    _store(admin, account, a)
    read = admin.stored_credentials()  # the rotator reads ...
    _store(admin, account, a, token="1//reconnected")  # ... a connect stores a new grant ...
    left = admin.rewrap_account_credentials(a.key_id, b.key_id, _items(read, a, b))
    assert left == [(account, a.key_id)]  # ... and the stale re-wrap is not applied
    assert _grant(state, account, a) == {"refresh_token": "1//reconnected"}
    # The rotator re-reads what was reported and re-wraps it: the same rotation, a later pass.
    again = admin.rewrap_account_credentials(
        a.key_id, b.key_id, _items(admin.stored_credentials(), a, b)
    )
    assert again == []
    assert _grant(state, account, b) == {"refresh_token": "1//reconnected"}


def test_a_second_rotation_from_the_same_key_is_refused(state, admin) -> None:
    account = _account(admin)
    a, b, c = MasterKey.generate(), MasterKey.generate(), MasterKey.generate()
    _store(admin, account, a)
    read = admin.stored_credentials()  # both rotators read the rows under A
    assert admin.rewrap_account_credentials(a.key_id, b.key_id, _items(read, a, b)) == []
    with pytest.raises(StateConflict, match=f"current master key is {b.key_id}"):
        admin.rewrap_account_credentials(a.key_id, c.key_id, _items(read, a, c))
    assert _grant(state, account, b) == {"refresh_token": REFRESH_TOKEN}
    assert state.master_key_state().current_key_id == b.key_id


def test_the_key_rpcs_are_the_operators_not_the_pipelines(owner) -> None:
    for function in (
        "mdame.store_account_credential(bigint, text, bytea, bytea)",
        "mdame.rewrap_account_credentials(text, text, jsonb)",
    ):
        can = owner.execute(
            "SELECT has_function_privilege('mdame_app', %s, 'EXECUTE'), "
            "has_function_privilege('mdame_admin', %s, 'EXECUTE')",
            (function, function),
        ).fetchone()
        assert can == (False, True), function


# -- the grace period of the replaced key ----------------------------------------------------
def test_a_reader_with_the_replaced_key_opens_grants_during_the_grace_only(
    state, admin, fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deployment that passes the key in MDAME_MASTER_KEY and was not redeployed yet."""
    account_id = _account(admin)
    [account] = state.list_accounts("tech")
    a, b = MasterKey.generate(), MasterKey.generate()
    _store(admin, account_id, a)
    admin.rewrap_account_credentials(a.key_id, b.key_id, _items(admin.stored_credentials(), a, b))
    pub = publisher(fake, tmp_path)
    monkeypatch.setenv("MDAME_MASTER_KEY", a.encoded())
    monkeypatch.setenv("MDAME_KEY_GRACE_S", "3600")
    assert pub.channel(state, account, "tech").uploads_playlist()
    monkeypatch.setenv("MDAME_KEY_GRACE_S", "1")
    rotated = state.master_key_state().rotated_at
    assert rotated is not None
    while (state.db_now() - rotated).total_seconds() <= 1.0:
        time.sleep(0.2)
    with pytest.raises(AccountUnavailable) as refused:
        pub.channel(state, account, "tech")
    said = str(refused.value)
    assert f"{a.key_id} was replaced by {b.key_id}" in said
    assert "MDAME_KEY_GRACE_S" in said and "redeploy with the new master key" in said
    assert a.encoded() not in said and b.encoded() not in said
    monkeypatch.setenv("MDAME_MASTER_KEY", b.encoded())  # the redeployed reader
    assert pub.channel(state, account, "tech").uploads_playlist()


def test_a_reader_with_the_new_key_opens_a_grant_still_under_the_previous_one(
    state, admin, fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A row a rotation could not re-wrap yet (it changed under it) stays under the replaced
    key: a redeployed reader opens it with MDAME_MASTER_KEY_PREVIOUS."""
    account_id = _account(admin)
    [account] = state.list_accounts("tech")
    a, b = MasterKey.generate(), MasterKey.generate()
    _store(admin, account_id, a)
    read = admin.stored_credentials()
    _store(admin, account_id, a, token=REFRESH_TOKEN)
    assert admin.rewrap_account_credentials(a.key_id, b.key_id, _items(read, a, b)) != []
    pub = publisher(fake, tmp_path)
    monkeypatch.setenv("MDAME_MASTER_KEY", b.encoded())
    with pytest.raises(AccountUnavailable, match=f"wrapped by master key {a.key_id}"):
        pub.channel(state, account, "tech")
    monkeypatch.setenv("MDAME_MASTER_KEY_PREVIOUS", a.encoded())
    assert pub.channel(state, account, "tech").uploads_playlist()


# -- the CLI, raced in this process ------------------------------------------------------------
@pytest.fixture
def operator(fresh_db, fake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The environment of an operator whose master key is in the default key file; returns the
    key file's path."""
    secrets = client_secrets(tmp_path / "client.json", fake)
    for name, value in {
        "MDAME_DATABASE_URL": fresh_db.owner,
        "MDAME_APP_DATABASE_URL": fresh_db.app,
        "MDAME_HOME": str(tmp_path / "home"),
        "MDAME_YOUTUBE_CLIENT_SECRETS": str(secrets),
        "OAUTHLIB_INSECURE_TRANSPORT": "1",
    }.items():
        monkeypatch.setenv(name, value)
    for name in ("MDAME_MASTER_KEY", "MDAME_MASTER_KEY_FILE", "MDAME_MASTER_KEY_PREVIOUS"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path / "home" / "master.key"


@pytest.fixture
def race() -> Iterator[Callable[[str, str, Callable[[], Any]], list[Any]]]:
    """race(rpc, when, competitor): runs `competitor` once, right before the first `rpc` call is
    sent (when="before") or right after it committed ("after"); returns what it returned or
    raised."""
    outcome: list[Any] = []

    def arm(rpc: str, when: str, competitor: Callable[[], Any]) -> list[Any]:
        def observer(name: str, moment: str) -> None:
            if name == rpc and moment == when and not outcome:
                outcome.append(None)
                try:
                    outcome[0] = competitor()
                except BaseException as exc:  # noqa: BLE001 - the competitor's refusal is data
                    outcome[0] = exc

        state_module.set_commit_observer(observer)
        return outcome

    yield arm
    state_module.set_commit_observer(None)


def _rotate() -> int:
    return rotate_keys(argparse.Namespace(new_key_file=None))


def _connect(fake: Any, monkeypatch: pytest.MonkeyPatch) -> int:
    monkeypatch.setattr(sys, "stdin", io.StringIO(_consent(fake.base_url) + "\n"))
    args = argparse.Namespace(
        dimension="tech",
        account="@tech",
        client_secrets=None,
        console=True,
        port=0,
        platform="youtube",
        redirect_uri=None,
    )
    return connect(args)


def test_rotate_racing_rotate_leaves_the_key_that_opens_every_grant(
    state, admin, operator: Path, fake, race, monkeypatch, capsys
) -> None:
    account = _account(admin)
    assert _connect(fake, monkeypatch) == 0
    first = read_key_file(operator)
    # The second rotation starts once the first has re-wrapped, before it installs its key file.
    outcome = race("rewrap_account_credentials", "after", _rotate)
    assert _rotate() == 0
    key = read_key_file(operator)
    assert key != first
    assert _grant(state, account, key) == {"refresh_token": REFRESH_TOKEN}
    [second] = outcome
    assert isinstance(second, SystemExit) and "current master key is" in str(second.code)
    previous = operator.with_name("master.key.previous")
    assert read_key_file(previous) == first  # read_key_file refuses anything but 0600
    left = sorted(p.name for p in operator.parent.iterdir())
    assert left == ["master.key", "master.key.previous"]  # no pending key file of either
    said = capsys.readouterr()
    for secret in (REFRESH_TOKEN, first.encoded(), key.encoded()):
        assert secret not in said.out + said.err


def test_a_connect_whose_key_is_rotated_during_consent_stores_under_the_new_key(
    state, admin, operator: Path, fake, race, monkeypatch, capsys
) -> None:
    account = _account(admin)
    other = admin.upsert_dimension_account("tech", "youtube", "@other", 10_000)
    key = MasterKey.generate()
    write_key_file(operator, key)
    sealed = seal_grant(key, associated_data("dev", "youtube", "@other"), {"refresh_token": "x"})
    admin.store_account_credential(other, sealed.key_id, sealed.wrapped_key, sealed.ciphertext)
    # The operator consents while someone rotates the key the connect has already loaded.
    outcome = race("store_account_credential", "before", _rotate)
    assert _connect(fake, monkeypatch) == 0
    assert outcome == [0]
    now = read_key_file(operator)
    assert now != key
    assert _grant(state, account, now) == {"refresh_token": REFRESH_TOKEN}
    said = capsys.readouterr()
    assert f"sealing the grant again under {now.key_id}" in said.err
    assert REFRESH_TOKEN not in said.out + said.err
    events = admin._select("SELECT detail::text FROM mdame.events")
    text = " ".join(d for (d,) in events)
    for secret in (REFRESH_TOKEN, key.encoded(), now.encoded()):
        assert secret not in text


def test_connect_without_the_databases_key_is_refused_before_consent(
    state, admin, operator: Path, fake, monkeypatch
) -> None:
    """A new key file is made only for a database with no grant yet: here it would seal a grant
    under a key the database refuses, after the operator had consented."""
    account = _account(admin)
    key = MasterKey.generate()
    _store(admin, account, key)
    with pytest.raises(SystemExit) as refused:
        _connect(fake, monkeypatch)
    assert f"grants are under master key {key.key_id}" in str(refused.value.code)
    assert not operator.exists()
    write_key_file(operator, MasterKey.generate())
    with pytest.raises(SystemExit, match=f"current master key is {key.key_id}"):
        _connect(fake, monkeypatch)
    assert sys.stdin.read()  # the consent was never asked for
