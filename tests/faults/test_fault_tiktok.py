"""The publications asset to two platforms at once on a real rendered partition: the
dimension's YouTube account (the outbox standing in for YouTube) and its TikTok account
(TikTokPublisher against the local TikTok server). Faults on TikTok end in one post with the
render's bytes, never hold the other account back, and no secret (the refresh tokens, the
master key) reaches the database."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from test_fault_youtube import _everything_in_the_database

from fakes import tiktok
from mdame_assets.defs.publications.assets import publications
from mdame_domain.credentials import MasterKey, associated_data, seal_grant
from mdame_resources.providers.publisher import TikTokPublisher
from tests.adminkit import as_admin

REFRESH_TOKEN = "rft.test-not-secret-" + "t" * 24


@pytest.mark.parametrize(
    ("fault", "options"),
    [("drop_final_chunk", {"stored": True}), ("chunk_5xx", {}), ("revoked", {})],
)
def test_a_tiktok_fault_ends_in_one_post_and_holds_no_other_account_back(
    rig, tmp_path: Path, monkeypatch, fault, options
) -> None:
    master = MasterKey.generate()
    monkeypatch.setenv("MDAME_MASTER_KEY", master.encoded())
    as_admin(rig.state).upsert_dimension_account("science", "tiktok", "@science-tt", 10_000)
    [youtube] = [a for a in rig.state.list_accounts("science") if a.platform == "youtube"]
    [account] = [a for a in rig.state.list_accounts("science") if a.platform == "tiktok"]
    sealed = seal_grant(
        master, associated_data("dev", "tiktok", account.handle), {"refresh_token": REFRESH_TOKEN}
    )
    as_admin(rig.state).store_account_credential(
        account.id, sealed.key_id, sealed.wrapped_key, sealed.ciphertext
    )
    with tiktok.running(tmp_path / "tiktok") as server:
        server.set_limits(processing_delay=0, moderation_delay=0)
        # An audited app and a public account: the dimension posts publicly.
        creator = server.add_creator(account.handle, REFRESH_TOKEN, audited=True)
        publisher = TikTokPublisher(
            client_key="ck",
            client_secret="cs-not-secret",
            base_url=server.base_url,
            timeout_s=5.0,
            processing_poll_s=0.01,
            upload_grace_s=0,
            gone_recheck_s=0.001,
        )
        server.faults.push(fault, **options)
        for _ in range(3):
            rig.materialize([publications], tiktok_publisher=publisher)
        script = rig.script()
        render = rig.state.get_work_unit("render", script.result["render_id"])
        posts = [p for p in server.publishes() if p["status"] == "PUBLISH_COMPLETE"]
        rotated = server.refresh_token(creator)
    pubs = {
        p.payload["account_id"]: p
        for p in rig.state.list_work_units("publication", script_id=script.id)
    }
    assert pubs[youtube.id].state == "published"  # the outbox published whatever TikTok did
    if fault == "revoked":
        assert posts == [] and rig.state.account_status(account.id).needs_reauth
        assert pubs[account.id].state == "pending" and script.state == "publishing"
    else:
        [post] = posts
        sent = hashlib.sha256(server.video_bytes(post["publish_id"])).hexdigest()
        assert sent == render.payload["sha256"]
        assert pubs[account.id].state == "published" and script.state == "published"
        assert pubs[account.id].result["video_id"] == str(post["post_id"])
    everything = _everything_in_the_database(rig.db.owner)
    for secret in (REFRESH_TOKEN, rotated, master.encoded(), "cs-not-secret"):
        assert secret not in everything
