"""The TikTok and Instagram publishers' health checks (`mdame doctor`'s tiktok and instagram
rows), run on the resources as the definitions build them against the local TikTok and
Instagram servers and a real database: a healthy account, a refused grant (named, with the
reconnect command, and marked nowhere), a missing scope, the app's missing or refused key, and
a rotated token kept. Every secret-like value here says "not-secret"; no message may."""

from __future__ import annotations

from pathlib import Path

import pytest

from fakes import instagram as fake_instagram
from fakes import tiktok as fake_tiktok
from mdame_cli.doctor.providers import pipeline_lock
from mdame_core.state import Account, StateStore
from mdame_domain.credentials import MasterKey, associated_data, seal_grant, write_key_file
from mdame_domain.doctor import Status
from mdame_pipeline.locks import held_lock
from mdame_resources.health import Health, HealthScope
from mdame_resources.providers.publisher import InstagramPublisher, TikTokPublisher
from mdame_resources.providers.publisher.grants import account_grant
from mdame_resources.providers.tiktok_api import CLIENT_KEY_VAR, CLIENT_SECRET_VAR
from tests.adminkit import as_admin

TIKTOK_TOKEN = "rft.health-not-secret-" + "t" * 16
IG_TOKEN = "IGAAhealth-not-secret-" + "i" * 16
CLIENT_KEY = "ck-health-not-secret"
CLIENT_SECRET = "cs-health-not-secret-0123"
APP_VARS = (
    CLIENT_KEY_VAR,
    CLIENT_SECRET_VAR,
    "MDAME_INSTAGRAM_APP_ID",
    "MDAME_INSTAGRAM_APP_SECRET",
    "MDAME_TIKTOK_BASE_URL",
    "MDAME_INSTAGRAM_GRAPH_URL",
    "MDAME_MASTER_KEY",
    "MDAME_MASTER_KEY_FILE",
)


@pytest.fixture(autouse=True)
def no_app_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in APP_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def master(tmp_path: Path) -> MasterKey:
    key = MasterKey.generate()
    write_key_file(tmp_path / "master.key", key)
    return key


def shown(found: list[Health]) -> list[tuple[str, Status]]:
    for health in found:
        assert "not-secret" not in health.message, f"a secret was shown: {health}"
    return [(h.subject, h.status) for h in found]


def connect(
    state: StateStore, platform: str, handle: str, token: str, master: MasterKey
) -> Account:
    """The tech dimension's `platform` account, its grant sealed and stored as `mdame accounts
    connect` stores it."""
    admin = as_admin(state)
    admin.upsert_dimension("tech", "Tech")
    admin.upsert_dimension_account("tech", platform, handle, 10_000)
    [account] = [a for a in state.list_accounts("tech") if a.platform == platform]
    store(state, account, token, master)
    return account


def store(state: StateStore, account: Account, token: str, master: MasterKey) -> None:
    aad = associated_data("dev", account.platform, account.handle)
    envelope = seal_grant(master, aad, {"refresh_token": token})
    as_admin(state).store_account_credential(
        account.id, envelope.key_id, envelope.wrapped_key, envelope.ciphertext
    )


def test_tiktok_check_opens_each_creator_as_the_publisher_does(
    state: StateStore, tmp_path: Path, master: MasterKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    key_file = str(tmp_path / "master.key")
    scope = HealthScope(slugs=["tech"], state=state, lock=pipeline_lock(state))
    with fake_tiktok.running(tmp_path / "tiktok") as fake:
        publisher = TikTokPublisher(base_url=fake.base_url, master_key_file=key_file)
        assert publisher.health_check(5.0, scope) == [
            Health(Status.SKIP, "no active TikTok account in the database")
        ]
        open_id = fake.add_creator("tech", TIKTOK_TOKEN)
        account = connect(state, "tiktok", "@tech-tt", TIKTOK_TOKEN, master)

        # The app's key and secret: one finding for the provider, naming the variables.
        [unset] = publisher.health_check(5.0, scope)
        assert shown([unset]) == [("", Status.FAIL)]
        assert unset.message.startswith(
            "MDAME_TIKTOK_CLIENT_KEY and MDAME_TIKTOK_CLIENT_SECRET not set"
        )
        assert fake.requests() == []  # nothing asked without the app's credentials
        monkeypatch.setenv(CLIENT_KEY_VAR, CLIENT_KEY)
        monkeypatch.setenv(CLIENT_SECRET_VAR, CLIENT_SECRET)

        [ok] = publisher.health_check(5.0, scope)
        assert shown([ok]) == [("tech/@tech-tt", Status.OK)], ok
        assert "token refreshed; creator_info answers for tech" in ok.message
        assert "video.publish and video.list granted" in ok.message
        # TikTok retired the refresh token sent: the rotated one is the stored grant now.
        rotated = fake.refresh_token(open_id)
        assert rotated != TIKTOK_TOKEN
        assert account_grant(state, account, "tech", key_file).refresh_token == rotated

        # An access token refused before its expiry: refreshed once, as the publisher does.
        fake.faults.push("expire_token", on="creator_info", spare=True)
        [again] = publisher.health_check(5.0, scope)
        assert again.status is Status.OK, again
        assert "creator_info" in fake.unauthorized()

        # A run of the dimension holds its lock: a refresh now could rotate its grant.
        with held_lock(state, "tech", "a run"):
            [busy] = publisher.health_check(5.0, scope)
        assert busy.status is Status.WARN and "holds its pipeline lock" in busy.message

        # A grant without Direct Post's scope, then one without the video list's.
        for scopes, lacking in (
            (["user.info.basic", "video.list"], "video.publish"),
            (["user.info.basic", "video.publish"], "video.list"),
        ):
            fake.add_creator("tech", TIKTOK_TOKEN, scopes=scopes)
            store(state, account, TIKTOK_TOKEN, master)
            [narrow] = publisher.health_check(5.0, scope)
            assert shown([narrow]) == [("tech/@tech-tt", Status.FAIL)]
            assert f"the grant lacks the scope {lacking}" in narrow.message
            assert "run `mdame accounts connect tech --platform tiktok --account @tech-tt`" in (
                narrow.message
            )

        # The creator removed the app: said, with the fix, and marked nowhere.
        fake.add_creator("tech", TIKTOK_TOKEN)
        store(state, account, TIKTOK_TOKEN, master)
        fake.revoke(open_id)
        [revoked] = publisher.health_check(5.0, scope)
        assert shown([revoked]) == [("tech/@tech-tt", Status.FAIL)]
        assert "TikTok refused the stored refresh token (invalid_grant)" in revoked.message
        assert "mdame accounts connect tech --platform tiktok --account @tech-tt" in (
            revoked.message
        )
        assert not state.account_status(account.id).needs_reauth

        # A refused app secret is the app's: one finding, not one per account.
        fake.add_creator("tech", TIKTOK_TOKEN)
        fake.client_secret = "the-real-secret-not-secret"
        [refused] = publisher.health_check(5.0, scope)
        assert shown([refused]) == [("", Status.FAIL)]
        assert "refused the app's client key or secret (invalid_client" in refused.message


def test_instagram_check_reads_the_token_and_the_publishing_limit(
    state: StateStore, tmp_path: Path, master: MasterKey
) -> None:
    key_file = str(tmp_path / "master.key")
    scope = HealthScope(slugs=["tech"], state=state, lock=pipeline_lock(state))
    with fake_instagram.running(tmp_path / "instagram") as fake:
        publisher = InstagramPublisher(graph_url=fake.base_url, master_key_file=key_file)
        assert publisher.health_check(5.0, scope) == [
            Health(Status.SKIP, "no active Instagram account in the database")
        ]
        ig_user = fake.add_account("tech", IG_TOKEN)
        account = connect(state, "instagram", "@tech-ig", IG_TOKEN, master)

        [ok] = publisher.health_check(5.0, scope)
        assert shown([ok]) == [("tech/@tech-ig", Status.OK)], ok
        assert ok.message == (
            f"token valid (IG user {ig_user}); content_publishing_limit: "
            "0 of 100 reels published in the last 24 hours"
        )
        # Cheap reads only: no container, no refresh (the weekly one is the runs').
        asked = fake.requests()
        assert not [r for r in asked if "/media" in r or "refresh_access_token" in r], asked

        fake.set_publish_limit(0)
        [full] = publisher.health_check(5.0, scope)
        assert full.status is Status.WARN and "publishing limit reached" in full.message
        fake.set_publish_limit(100)

        # A token refused before its expiry: refreshed once and the new one stored.
        fake.faults.push("expire_token", on="account")
        [again] = publisher.health_check(5.0, scope)
        assert again.status is Status.OK, again
        assert account_grant(state, account, "tech", key_file).refresh_token != IG_TOKEN

        # The owner removed the app: every token refused, the refresh too.
        fake.revoke(ig_user_id=ig_user)
        [revoked] = publisher.health_check(5.0, scope)
        assert shown([revoked]) == [("tech/@tech-ig", Status.FAIL)]
        assert "Instagram refused the account's token" in revoked.message
        assert "run `mdame accounts connect tech --platform instagram --account @tech-ig`" in (
            revoked.message
        )
        assert "MDAME_INSTAGRAM_APP_ID and MDAME_INSTAGRAM_APP_SECRET not set" in revoked.message
        assert not state.account_status(account.id).needs_reauth


def test_a_check_without_a_lock_leaves_the_grant_alone(
    state: StateStore, tmp_path: Path, master: MasterKey, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(CLIENT_KEY_VAR, CLIENT_KEY)
    monkeypatch.setenv(CLIENT_SECRET_VAR, CLIENT_SECRET)
    with fake_tiktok.running(tmp_path / "tiktok") as fake:
        fake.add_creator("tech", TIKTOK_TOKEN)
        connect(state, "tiktok", "@tech-tt", TIKTOK_TOKEN, master)
        publisher = TikTokPublisher(
            base_url=fake.base_url, master_key_file=str(tmp_path / "master.key")
        )
        [skipped] = publisher.health_check(5.0, HealthScope(slugs=["tech"], state=state))
        assert skipped.status is Status.SKIP and "no pipeline lock" in skipped.message
        assert fake.requests() == []
