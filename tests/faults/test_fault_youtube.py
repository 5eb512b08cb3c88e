"""The publications asset through YouTubePublisher to the local fake, on a real rendered
partition: faults end in one video with the render's bytes, progress reaches the run's metadata,
and no secret (the refresh token, the master key) appears in any log line, event, table, run
metadata or exception."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from fakes.youtube import running
from mdame_assets.defs.publications.assets import publications
from mdame_domain.credentials import MasterKey, associated_data, seal_grant
from mdame_resources.providers.publisher import YouTubePublisher
from tests.adminkit import as_admin

REFRESH_TOKEN = "1//rt-test-not-secret-" + "z" * 24


def _everything_in_the_database(owner_url: str) -> str:
    with psycopg.connect(owner_url, autocommit=True) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'mdame' ORDER BY 1"
            )
        ]
        return "\n".join(
            str(conn.execute(f"SELECT string_agg(t::text, '|') FROM mdame.{t} t").fetchone())  # noqa: S608
            for t in tables
        )


@pytest.mark.parametrize("fault", ["reset_mid_chunk", "lost_response", "invalid_grant"])
def test_the_asset_publishes_once_and_leaks_no_secret(
    rig, tmp_path: Path, monkeypatch, capfd, fault
) -> None:
    master = MasterKey.generate()
    monkeypatch.setenv("MDAME_MASTER_KEY", master.encoded())
    [account] = rig.state.list_accounts("science")
    env = seal_grant(
        master,
        associated_data("dev", account.platform, account.handle),
        {"refresh_token": REFRESH_TOKEN},
    )
    as_admin(rig.state).store_account_credential(
        account.id, env.key_id, env.wrapped_key, env.ciphertext
    )
    secrets = tmp_path / "client.json"
    secrets.write_text(json.dumps({"installed": {"client_id": "c", "client_secret": "s"}}))
    with running(tmp_path / "fake") as fake:
        channel = fake.add_channel(account.handle, REFRESH_TOKEN)
        publisher = YouTubePublisher(
            client_secrets_file=str(secrets),
            root_url=fake.base_url,
            token_uri=fake.token_uri,
            chunk_size=256 * 1024,
            timeout_s=5.0,
            processing_poll_s=0.01,
            upload_grace_s=0,
        )
        fake.faults.push(fault)
        results = [rig.materialize([publications], youtube_publisher=publisher) for _ in range(3)]
        script = rig.script()
        render = rig.state.get_work_unit("render", script.result["render_id"])
        if fault == "invalid_grant":
            assert fake.videos() == []
            assert rig.state.account_status(account.id).needs_reauth
            assert script.state == "publishing"
        else:
            [video] = fake.videos(channel)
            assert video["sha256"] == render.payload["sha256"]
            assert fake.video_bytes(video["id"]) and script.state == "published"
            ok = [r for r in results if r.success]
            metadata = ok[0].asset_materializations_for_node("publications")[0].metadata
            [progress] = metadata["uploads"].data.values()
            assert progress["sent_bytes"] == progress["total_bytes"] > 0
            usage = rig.state.bucket_usage(account.id)
            assert usage["insert"] == (0, fake.counters(channel)["insert"]) == (0, 1)
            assert usage["units"] == (0, fake.counters(channel)["units"])

    out = capfd.readouterr()
    runs = [str(record) for result in results for record in rig.instance.all_logs(result.run_id)]
    haystack = "\n".join([out.out, out.err, *runs, _everything_in_the_database(rig.db.owner)])
    assert haystack.count("science") > 0  # the haystack is real
    assert REFRESH_TOKEN not in haystack
    assert master.encoded() not in haystack
    assert master.key.hex() not in haystack
