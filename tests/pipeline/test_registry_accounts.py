"""The registry sync deactivates accounts removed from a dimension's YAML, and only those."""

from __future__ import annotations

import shutil
from pathlib import Path

from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, registry_drift, sync_registry
from tests.adminkit import as_admin


def _accounts(state, slug: str) -> dict[str, bool]:
    return {a.handle: a.active for a in state.list_accounts(slug)}


def test_removed_accounts_are_deactivated_and_restored(state, tmp_path: Path) -> None:
    folder = tmp_path / "dimensions"
    shutil.copytree(DIMENSIONS_DIR, folder)
    tech = folder / "tech.yaml"
    original = tech.read_text()
    tech.write_text(
        original.replace(
            "accounts:\n",
            "accounts:\n  - {platform: instagram, handle: '@tech-ig', daily_quota_units: 10000,"
            " quota_timezone: America/New_York}\n",
        )
    )
    sync_registry(as_admin(state), folder)
    assert _accounts(state, "tech") == {"tech-in-60": True, "@tech-ig": True}
    zones = {a.handle: a.quota_timezone for a in state.list_accounts("tech")}
    assert zones == {"tech-in-60": "America/Los_Angeles", "@tech-ig": "America/New_York"}
    science = _accounts(state, "science")

    tech.write_text(original)  # the Instagram account is removed from the file
    sync_registry(as_admin(state), folder)
    assert _accounts(state, "tech") == {"tech-in-60": True, "@tech-ig": False}
    assert [a.handle for a in state.list_accounts("tech", active_only=True)] == ["tech-in-60"]
    assert _accounts(state, "science") == science  # other dimensions untouched

    tech.write_text("slug: tech\ntitle: [broken\n")  # a malformed file changes nothing
    report = sync_registry(as_admin(state), folder)
    assert report.errors
    assert _accounts(state, "tech") == {"tech-in-60": True, "@tech-ig": False}


def test_publish_to_and_daily_posts_reach_the_registry(state, tmp_path: Path) -> None:
    folder = tmp_path / "dimensions"
    shutil.copytree(DIMENSIONS_DIR, folder)
    tech = folder / "tech.yaml"
    original = tech.read_text()
    both = original.replace(
        "accounts:\n",
        "accounts:\n  - {platform: tiktok, handle: '@tech-tt'}\n",
    )
    tech.write_text(both)
    sync_registry(as_admin(state), folder)
    posts = {a.handle: (a.active, a.daily_posts) for a in state.list_accounts("tech")}
    assert posts == {"tech-in-60": (True, 100), "@tech-tt": (True, 15)}
    assert registry_drift(state, folder).drift == ()

    # TikTok left out of publish_to: its account stays registered, and publishes nothing.
    tech.write_text(both + "publish_to: [youtube]\n")
    assert registry_drift(state, folder).drift  # until synced
    sync_registry(as_admin(state), folder)
    assert _accounts(state, "tech") == {"tech-in-60": True, "@tech-tt": False}
    assert registry_drift(state, folder).drift == ()

    tech.write_text(both.replace("handle: '@tech-tt'", "handle: '@tech-tt', daily_posts: 3"))
    sync_registry(as_admin(state), folder)
    posts = {a.handle: (a.active, a.daily_posts) for a in state.list_accounts("tech")}
    assert posts == {"tech-in-60": (True, 100), "@tech-tt": (True, 3)}


def test_a_sync_restores_whatever_differs_from_the_files_and_leaves_the_rest(
    state, owner, tmp_path: Path
) -> None:
    folder = tmp_path / "dimensions"
    shutil.copytree(DIMENSIONS_DIR, folder)
    sync_registry(as_admin(state), folder)
    stamps = owner.execute("SELECT slug, updated_at FROM mdame.dimensions ORDER BY slug").fetchall()
    owner.execute(
        "UPDATE mdame.dimension_accounts SET daily_insert_calls = 1 WHERE handle = 'tech-in-60'"
    )
    owner.execute("UPDATE mdame.dimensions SET title = 'Edited' WHERE slug = 'science'")
    drift = registry_drift(state, folder).drift
    assert any("tech.yaml lists other accounts" in line for line in drift), drift
    assert any("science.yaml differs from its registration" in line for line in drift), drift
    sync_registry(as_admin(state), folder)
    assert registry_drift(state, folder).drift == ()
    assert {a.handle: a.daily_posts for a in state.list_accounts("tech")} == {"tech-in-60": 100}
    again = owner.execute("SELECT slug, updated_at FROM mdame.dimensions ORDER BY slug").fetchall()
    assert again[0] == stamps[0]  # cooking, unchanged, was not written
    assert state.get_dimension("science").title == "Science Snacks"
