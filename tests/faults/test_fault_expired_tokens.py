"""An access token refused before its stated expiry, on a real rendered partition through the
publications asset, for each platform's publisher against its local server: one early expiry on
the initiation, on a chunk, on a status query or on a list call is refreshed through and
publishes once, with no account marked needs_reauth and the quota ledger equal to the
platform's counters. A revoked grant, met the same way, still asks for a reconnect, in the
platform's own words and with the fix."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from fakes import instagram, tiktok, youtube
from mdame_assets.defs.publications.assets import publications
from mdame_core.state import Account, StateStore
from mdame_domain.credentials import MasterKey, associated_data, seal_grant
from mdame_resources.providers.publisher import (
    InstagramPublisher,
    TikTokPublisher,
    YouTubePublisher,
)
from tests.adminkit import as_admin

TOKEN = "grant-not-secret-" + "e" * 24
HANDLES = {"tiktok": "@science-tt", "instagram": "science.reels"}


@dataclass
class Channel:
    """One platform's server with the account connected, and what the checks read of it."""

    server: Any
    resources: dict[str, Any]  # the publications asset's resources for the platform
    published: Callable[[], list[str]]  # the SHA-256 of every published video
    counted: Callable[[], int]  # initiations the platform counted (the insert bucket's)


def _account(rig: Any, platform: str) -> Account:
    """The science account `platform` publishes to (the deployment's own for YouTube), its
    grant stored."""
    if platform in HANDLES:
        as_admin(rig.state).upsert_dimension_account("science", platform, HANDLES[platform], 100)
    accounts = rig.state.list_accounts("science")
    [account] = [a for a in accounts if (a.platform == platform) or (platform == "youtube")]
    return account


def _store(state: StateStore, account: Account, master: MasterKey) -> None:
    aad = associated_data("dev", account.platform, account.handle)
    sealed = seal_grant(master, aad, {"refresh_token": TOKEN})
    as_admin(state).store_account_credential(
        account.id, sealed.key_id, sealed.wrapped_key, sealed.ciphertext
    )


@contextmanager
def _channel(platform: str, account: Account, tmp_path: Path) -> Iterator[Channel]:
    common: dict[str, Any] = {
        "timeout_s": 5.0,
        "processing_poll_s": 0.01,
        "upload_grace_s": 0,
        "gone_recheck_s": 0.001,
    }
    if platform == "youtube":
        secrets = tmp_path / "client.json"
        secrets.write_text(json.dumps({"installed": {"client_id": "c", "client_secret": "s"}}))
        with youtube.running(tmp_path / "youtube") as server:
            channel = server.add_channel(account.handle, TOKEN)
            publisher = YouTubePublisher(
                client_secrets_file=str(secrets),
                root_url=server.base_url,
                token_uri=server.token_uri,
                chunk_size=256 * 1024,
                **common,
            )
            yield Channel(
                server,
                {"youtube_publisher": publisher},
                lambda: [v["sha256"] for v in server.videos(channel)],
                lambda: server.counters(channel)["insert"],
            )
    elif platform == "tiktok":
        with tiktok.running(tmp_path / "tiktok") as server:
            server.set_limits(processing_delay=0, moderation_delay=0)
            server.add_creator(account.handle, TOKEN, audited=True)
            yield Channel(
                server,
                {
                    "tiktok_publisher": TikTokPublisher(
                        client_key="ck", client_secret="cs", base_url=server.base_url, **common
                    )
                },
                lambda: [
                    hashlib.sha256(server.video_bytes(p["publish_id"])).hexdigest()
                    for p in server.publishes()
                    if p["status"] == "PUBLISH_COMPLETE"
                ],
                lambda: len(server.publishes()),
            )
    else:
        with instagram.running(tmp_path / "instagram") as server:
            server.set_processing_delay(0)
            server.add_account(account.handle, TOKEN)
            publisher = InstagramPublisher(
                graph_url=server.base_url, chunk_size=256 * 1024, processing_polls=3, **common
            )
            yield Channel(
                server,
                {"instagram_publisher": publisher},
                lambda: [m["sha256"] for m in server.media()],
                lambda: len(server.media()),
            )


# Each point of the upload, per platform: the request kind the token expires on, and what must
# happen first for that request to be made (a status query follows an interruption on YouTube;
# a list call follows a gone session on TikTok and Instagram).
POINTS: dict[str, dict[str, tuple[str, list[tuple[str, dict[str, Any]]]]]] = {
    "youtube": {
        "initiation": ("initiate", []),
        "chunk": ("chunk", []),
        "status": ("status", [("reset_mid_chunk", {})]),
        "list": ("list", []),  # the processing poll (videos.list)
    },
    "tiktok": {
        "initiation": ("init", []),
        "chunk": ("chunk", []),  # no token rides a chunk: the next call meets the expiry
        "status": ("status", []),
        "list": ("list", [("expire_publish", {})]),  # the upload gone, its post searched for
    },
    "instagram": {
        "initiation": ("create", []),
        "chunk": ("upload", []),
        "status": ("status", []),
        "list": ("list", [("lost_publish", {})]),  # published, its answer lost: searched for
    },
}


def _run_until_published(rig: Any, channel: Channel, runs: int = 4) -> None:
    for _ in range(runs):
        rig.materialize([publications], **channel.resources)
        if rig.script().state == "published":
            return


@pytest.mark.parametrize("point", ["initiation", "chunk", "status", "list"])
@pytest.mark.parametrize("platform", ["youtube", "tiktok", "instagram"])
def test_one_early_expiry_is_refreshed_through_and_publishes_once(
    rig, tmp_path: Path, monkeypatch, platform: str, point: str
) -> None:
    master = MasterKey.generate()
    monkeypatch.setenv("MDAME_MASTER_KEY", master.encoded())
    account = _account(rig, platform)
    _store(rig.state, account, master)
    kind, before = POINTS[platform][point]
    with _channel(platform, account, tmp_path) as channel:
        for fault, options in before:
            channel.server.faults.push(fault, **options)
        channel.server.faults.push("expire_token", on=kind)
        _run_until_published(rig, channel)
        assert not channel.server.faults.pending(), "a fault never fired"
        refused = channel.server.unauthorized()
        published, counted = channel.published(), channel.counted()

    # The expired token was met where it was meant to be (on TikTok, a chunk carries none:
    # the status query after it is the first call to meet it), and met once.
    assert refused[:1] == ["status" if (platform, point) == ("tiktok", "chunk") else kind]
    assert len(refused) <= 2, refused  # an upload refused, then the container asked
    script = rig.script()
    render = rig.state.get_work_unit("render", script.result["render_id"])
    assert published == [render.payload["sha256"]] and script.state == "published"
    assert not rig.state.account_status(account.id).needs_reauth
    # The ledger counted what the platform counted: a refused request costs nothing.
    assert rig.state.bucket_usage(account.id).get("insert", (0, 0)) == (0, counted)


REVOKED = {
    # platform: (the fault and its options, the platform's own words)
    "youtube": (("revoked", {"on": "initiate"}), "Token has been expired or revoked."),
    "tiktok": (("revoked", {}), "Refresh token is invalid or expired."),
    "instagram": (
        ("revoke_token", {"on": "create"}),
        "The user has not authorized application",
    ),
}


@pytest.mark.parametrize("platform", ["youtube", "tiktok", "instagram"])
def test_a_revoked_grant_still_asks_for_a_reconnect_in_the_platforms_words(
    rig, tmp_path: Path, monkeypatch, platform: str
) -> None:
    """The access token is refused (the owner revoked the app), and so is its refresh: the
    account is marked needs_reauth once, and the alert says why and what to run."""
    master = MasterKey.generate()
    monkeypatch.setenv("MDAME_MASTER_KEY", master.encoded())
    account = _account(rig, platform)
    _store(rig.state, account, master)
    (fault, options), words = REVOKED[platform]
    with _channel(platform, account, tmp_path) as channel:
        channel.server.faults.push(fault, **options)
        for _ in range(2):
            rig.materialize([publications], **channel.resources)
        assert not channel.server.faults.pending(), "the fault never fired"
        published = channel.published()

    assert published == [] and rig.script().state == "publishing"
    assert rig.state.account_status(account.id).needs_reauth
    [(alert,)] = rig.state._select("SELECT text FROM mdame.alerts WHERE cause = 'reauth_needed'")
    assert words in alert, alert
    # The command runs this platform's consent flow (without --platform it would be YouTube's).
    flag = "" if platform == "youtube" else f" --platform {platform}"
    assert f"mdame accounts connect science{flag} --account {account.handle}" in alert
    assert TOKEN not in alert
