"""0035: an `outbox` account becomes what it always published to, a youtube account, on a real
database migrated the way a deployed one is (every migration before 0035, rows written, then
the rest). What it published is found published under the same key (no second upload), its
sealed grant still opens, the registered config says youtube, the runner passes the migration's
message on, and an outbox account can no longer be registered."""

from __future__ import annotations

import shutil
from pathlib import Path

import psycopg
import pytest
from psycopg.types.json import Jsonb
from test_fencing import expire, hold

from mdame_assets.defs.publications.assets import publication_key
from mdame_core.migrate import MIGRATIONS_DIR, MigrationError, migrate
from mdame_core.state import InvalidInput, StateStore
from mdame_domain.credentials import MasterKey, associated_data, seal_grant
from mdame_domain.idempotency import idempotency_key
from mdame_resources.providers.publisher.grants import account_grant
from tests.adminkit import as_admin

DAY = "2026-11-29"
SHA = "e" * 64
DECISION = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}
HANDLE = "tech-in-60"
RENAME = "0035_youtube_accounts.sql"


def _before_the_rename(tmp_path: Path) -> Path:
    """The migrations directory as it was before the rename."""
    folder = tmp_path / "migrations"
    folder.mkdir()
    for path in MIGRATIONS_DIR.iterdir():
        if path.name[:4].isdigit() and path.name[:4] < RENAME[:4]:
            shutil.copy(path, folder / path.name)
    return folder


def _register_outbox_account(owner: psycopg.Connection, handle: str = HANDLE) -> int:
    """An outbox account as the registry stored one before the rename (the functions refuse
    to register one now), with its dimension's config as the file said it."""
    config = {
        "slug": "tech",
        "accounts": [{"platform": "outbox", "handle": handle, "daily_quota_units": 10000}],
        "publish_to": ["outbox"],
    }
    (dim,) = owner.execute(
        """INSERT INTO mdame.dimensions (slug, title, config) VALUES ('tech', 'Tech', %s)
           ON CONFLICT (slug) DO UPDATE SET config = excluded.config RETURNING id""",
        [Jsonb(config)],
    ).fetchone()
    (account,) = owner.execute(
        """INSERT INTO mdame.dimension_accounts (dimension_id, platform, handle, daily_quota_units)
           VALUES (%s, 'outbox', %s, 10000) RETURNING id""",
        [dim, handle],
    ).fetchone()
    return int(account)


def _published(state: StateStore, account: int) -> tuple[str, int, str]:
    """A script published on the outbox account, keyed as publishing keyed it before the
    rename: (script key, publication id, video id)."""
    a = hold(state, "tech")
    dim = state.get_dimension("tech")
    assert dim is not None
    base = {"dimension_id": dim.id, "partition_date": DAY}
    [trend] = a.record_trends("tech", [{"key": "tr", "payload": {**base, "title": "AI"}}])
    topic = a.decide_topic("to", {**base, "trend_id": trend}, DECISION)
    script = a.record_script("sc", {**base, "topic_id": topic}, DECISION)
    scene = {"uri": f"media://{'a' * 64}.mp4", "sha256": "a" * 64}
    jobs = [
        {
            "key": f"scene-{i}",
            "payload": {"script_id": script, "scene_index": i, "scene_hash": f"h{i}"},
            "cached": scene,
            "job": {"scene_hash": f"h{i}", "prompt": "p"},
        }
        for i in range(3)
    ]
    a.plan_scenes(script, jobs, "scene_clip", 3, f"{DAY}|tech")
    a.finish_visuals(script)
    a.transition("script", script, "visuals_ready", "voice_queued")
    a.record_voice(script, "vo", {"script_id": script, "uri": "media://v"})
    a.transition("script", script, "voiced", "render_queued")
    a.record_render(script, "re", {"script_id": script, "sha256": SHA, "problems": []}, "technical")
    unit = a.get_work_unit("script", script)
    assert unit is not None
    a.transition("script", script, "rendered", "publishing")
    payload = {
        "script_id": script,
        "render_id": unit.result["render_id"],
        "account_id": account,
        "content_sha256": SHA,
    }
    key = idempotency_key(unit.idempotency_key, "publication", "outbox", HANDLE)
    start = a.begin_bucket_upload(key, payload, "insert", 1, "outbox", ["technical"], 0)
    assert start.action == "submit"
    assert a.finish_upload(start.attempt_id, "succeeded", "vid-1") == "published"
    return unit.idempotency_key, start.publication_id, key


def test_an_outbox_account_becomes_youtube_and_nothing_it_published_goes_out_again(
    empty_db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    migrate(empty_db.owner, "dev", _before_the_rename(tmp_path))
    master = MasterKey.generate()
    monkeypatch.setenv("MDAME_MASTER_KEY", master.encoded())
    with psycopg.connect(empty_db.owner, autocommit=True) as owner:
        account_id = _register_outbox_account(owner)
        with StateStore(empty_db.app, env="dev", pool_max=2) as state:
            script_key, publication_id, old_key = _published(state, account_id)
            sealed = seal_grant(
                master, associated_data("dev", "outbox", HANDLE), {"refresh_token": "rt-1"}
            )
            as_admin(state).store_account_credential(
                account_id, sealed.key_id, sealed.wrapped_key, sealed.ciphertext
            )

        said: list[str] = []
        assert migrate(empty_db.owner, "dev", notify=said.append)[0] == RENAME
        [message] = [m for m in said if m.startswith(RENAME)]
        assert "WARNING" in message
        assert "1 outbox account(s) are youtube accounts now" in message
        assert "1 registered dimension config(s)" in message
        assert "platform: youtube" in message and "not published again" in message

        assert owner.execute(
            "SELECT platform, registered_as FROM mdame.dimension_accounts WHERE id = %s",
            [account_id],
        ).fetchone() == ("youtube", "outbox")
        (config,) = owner.execute("SELECT config FROM mdame.dimensions").fetchone()
        assert config["accounts"][0]["platform"] == "youtube"
        assert config["publish_to"] == ["youtube"]
        (attempts,) = owner.execute("SELECT count(*) FROM mdame.provider_attempts").fetchone()

        with StateStore(empty_db.app, env="dev", pool_max=2) as state:
            [account] = state.list_accounts("tech")
            assert (account.platform, account.key_platform) == ("youtube", "outbox")
            script = state.get_work_unit("script", state.list_work_units("script")[0].id)
            assert script is not None and script.idempotency_key == script_key
            # Publishing derives the same key: the recovery point finds it published.
            key = publication_key(script, account)
            assert key == old_key
            expire(owner, "tech")  # the run before the migration is long gone
            a = hold(state, "tech", holder="after")
            pub = a.get_work_unit("publication", key)
            assert pub is not None and pub.id == publication_id
            again = a.begin_bucket_upload(key, pub.payload, "insert", 1, "outbox", ["technical"], 0)
            assert (again.action, again.publication_id) == ("published", publication_id)
            # The grant sealed under the old name opens.
            grant = account_grant(state, account, "tech", "")
            assert grant.refresh_token == "rt-1"
            with pytest.raises(InvalidInput, match="platform outbox is now youtube"):
                as_admin(state).upsert_dimension_account("tech", "outbox", "other", 10)
        assert owner.execute("SELECT count(*) FROM mdame.provider_attempts").fetchone() == (
            attempts,
        )
        with pytest.raises(psycopg.errors.CheckViolation):
            owner.execute(
                "UPDATE mdame.dimension_accounts SET platform = 'outbox' WHERE id = %s",
                [account_id],
            )


def test_a_handle_registered_as_outbox_and_youtube_stops_the_migration(
    empty_db, tmp_path: Path
) -> None:
    migrate(empty_db.owner, "dev", _before_the_rename(tmp_path))
    with psycopg.connect(empty_db.owner, autocommit=True) as owner:
        account_id = _register_outbox_account(owner)
        owner.execute(
            """INSERT INTO mdame.dimension_accounts (dimension_id, platform, handle,
                                                     daily_quota_units)
               SELECT dimension_id, 'youtube', handle, 1 FROM mdame.dimension_accounts""",
        )
        with pytest.raises(MigrationError, match=f"both outbox and youtube: {HANDLE}"):
            migrate(empty_db.owner, "dev")
        assert owner.execute(
            "SELECT platform FROM mdame.dimension_accounts WHERE id = %s", [account_id]
        ).fetchone() == ("outbox",)
        assert not owner.execute(
            "SELECT 1 FROM mdame.schema_migrations WHERE filename = %s", [RENAME]
        ).fetchone()
