"""Retention (issue 12): the database decides what stored media may go, housekeeping deletes
exactly that (local folder and S3), a run stopped midway converges, and a row can never start
naming an object while it is being collected."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import psycopg
import pytest

from mdame_assets.defs.housekeeping.assets import housekeeping
from mdame_core.state import (
    InvalidInput,
    MediaCollected,
    NotFound,
    StateConflict,
    set_commit_observer,
)
from mdame_domain.media_store import LocalMediaStore, MediaStore
from mdame_domain.retention import RetentionPolicy, RetentionSettings
from mdame_pipeline.housekeeping import collect_media
from mdame_resources.media import MediaStoreResource, name_stored
from mdame_resources.notify import OutboxNotifier
from mdame_resources.state import StateStoreResource, close_clients
from tests.adminkit import as_admin

POLICY = RetentionPolicy(render_days=30, voice_days=7)


@dataclass
class Seeded:
    """Stored objects by name (URI), and which of them the policy lets go."""

    uris: dict[str, str]
    sizes: dict[str, int]
    collectable: set[str]

    def needed(self) -> set[str]:
        return set(self.uris) - self.collectable


def _put(store: MediaStore, tmp: Path, name: str, suffix: str) -> tuple[str, str, int]:
    data = (name.encode() * 1000)[: 2000 + len(name) * 37]
    path = tmp / f"{name}{suffix}"
    path.write_bytes(data)
    stored = store.put_file(path, suffix)
    return stored.uri, stored.sha256, len(data)


class _Rows:
    """Rows written as the owner: the graph of a few scripts in chosen states and ages."""

    def __init__(self, owner: psycopg.Connection) -> None:
        self.owner = owner
        self.n = 0
        self.dim = self._one(
            "INSERT INTO mdame.dimensions (slug, title) VALUES ('tech', 'Tech') RETURNING id"
        )
        self.account = self._one(
            "INSERT INTO mdame.dimension_accounts (dimension_id, platform, handle, "
            "daily_quota_units) VALUES (%s, 'youtube', '@tech', 10000) RETURNING id",
            [self.dim],
        )

    def _one(self, sql: str, args: list | None = None) -> int:
        return self.owner.execute(sql, args or []).fetchone()[0]

    def _key(self) -> str:
        self.n += 1
        return f"k{self.n}"

    def _unit(self, table: str, state: str, payload: dict, extra: dict, age_days: float) -> int:
        cols = ["idempotency_key", "state", "payload", "updated_at", *extra]
        vals = [self._key(), state, json.dumps(payload), f"-{age_days} days", *extra.values()]
        marks = ", ".join(
            "now() + %s::interval" if c == "updated_at" else "%s::jsonb" if c == "payload" else "%s"
            for c in cols
        )
        return self._one(
            f"INSERT INTO mdame.{table} ({', '.join(cols)}) VALUES ({marks}) RETURNING id", vals
        )

    def script(self, state: str, age_days: float = 0) -> int:
        base = {"dimension_id": self.dim, "partition_date": "2026-10-01"}
        topic = self._unit("topics", "approved", {}, base, 0)
        return self._unit("scripts", state, {}, {**base, "topic_id": topic}, age_days)

    def scene(self, script: int, uri: str, sha: str) -> int:
        scene = self._unit(
            "scenes",
            "ready",
            {},
            {"script_id": script, "scene_index": self.n, "scene_hash": f"h{self.n}"},
            0,
        )
        self.owner.execute(
            "UPDATE mdame.scenes SET result = %s::jsonb WHERE id = %s",
            [json.dumps({"uri": uri, "sha256": sha}), scene],
        )
        return scene

    def cache(self, uri: str, sha: str, live: bool) -> None:
        self.owner.execute(
            "INSERT INTO mdame.scene_cache (scene_hash, uri, content_sha256, expires_at) "
            "VALUES (%s, %s, %s, now() + %s::interval)",
            [f"cache-{self._key()}", uri, sha, "1 day" if live else "-1 day"],
        )

    def voice(self, script: int, uri: str, sha: str) -> int:
        return self._unit(
            "voice_tracks", "ready", {"uri": uri, "sha256": sha}, {"script_id": script}, 0
        )

    def render(
        self,
        script: int,
        uri: str,
        sha: str,
        thumb: tuple[str, str] | None,
        sheet: tuple[str, str] | None = None,
    ) -> int:
        payload = {"uri": uri, "sha256": sha}
        if thumb:
            payload |= {"thumbnail_uri": thumb[0], "thumbnail_sha256": thumb[1]}
        if sheet:
            payload |= {"contact_sheet_uri": sheet[0], "contact_sheet_sha256": sheet[1]}
        return self._unit("renders", "approved", payload, {"script_id": script}, 0)

    def publication(self, script: int, render: int, state: str, age_days: float) -> int:
        return self._unit(
            "publications",
            state,
            {},
            {"script_id": script, "render_id": render, "account_id": self.account},
            age_days,
        )


def seed(owner: psycopg.Connection, store: MediaStore, tmp: Path) -> Seeded:
    """Scripts of every kind the policy tells apart, each with its own stored objects."""
    rows = _Rows(owner)
    objs: dict[str, tuple[str, str, int]] = {}

    def obj(name: str, suffix: str) -> tuple[str, str]:
        objs[name] = _put(store, tmp, name, suffix)
        return objs[name][0], objs[name][1]

    # Published 40 days ago: clip (cache expired), voice, render, thumbnail and contact sheet
    # all go.
    old = rows.script("published", 40)
    rows.scene(old, *obj("clip_old", ".mp4"))
    rows.cache(*obj("clip_old", ".mp4"), live=False)
    rows.voice(old, *obj("voice_old", ".wav"))
    render = rows.render(
        old, *obj("render_old", ".mp4"), obj("thumb_old", ".jpg"), obj("sheet_old", ".jpg")
    )
    rows.publication(old, render, "published", 40)
    # A clip the old script shares with a script still in progress: kept.
    shared = obj("clip_shared", ".mp4")
    rows.scene(old, *shared)
    # A clip whose scene-cache entry is still live: kept (the cache TTL).
    cached = obj("clip_cached", ".mp4")
    rows.scene(old, *cached)
    rows.cache(*cached, live=True)

    # Published 3 days ago: its clip goes (no render needs it), voice (7 days) and render
    # (30 days) stay.
    recent = rows.script("published", 3)
    rows.scene(recent, *obj("clip_recent", ".mp4"))
    rows.voice(recent, *obj("voice_recent", ".wav"))
    render = rows.render(recent, *obj("render_recent", ".mp4"), None)
    rows.publication(recent, render, "published", 3)

    # In progress (rendered, publication pending): everything stays.
    live = rows.script("publishing", 100)
    rows.scene(live, *shared)
    rows.scene(live, *obj("clip_live", ".mp4"))
    rows.voice(live, *obj("voice_live", ".wav"))
    render = rows.render(
        live, *obj("render_live", ".mp4"), obj("thumb_live", ".jpg"), obj("sheet_live", ".jpg")
    )
    rows.publication(live, render, "pending", 100)

    # Halted long ago (a voice retry may bring it back): its clip stays.
    halted = rows.script("halted", 100)
    rows.scene(halted, *obj("clip_halted", ".mp4"))

    # Failed long ago: its voice goes.
    failed = rows.script("failed", 100)
    rows.voice(failed, *obj("voice_failed", ".wav"))

    # Stored but named by no row (a step stored it and has not recorded it yet): never.
    obj("orphan", ".mp4")

    collectable = {"clip_old", "voice_old", "render_old", "thumb_old", "sheet_old", "clip_recent"}
    collectable.add("voice_failed")
    return Seeded(
        {name: uri for name, (uri, _, _) in objs.items()},
        {name: size for name, (_, _, size) in objs.items()},
        collectable,
    )


@pytest.fixture(params=["local", "s3"])
def store(request, tmp_path: Path) -> Iterator[MediaStore]:
    if request.param == "local":
        yield LocalMediaStore(tmp_path / "media")
        return
    from mdame_domain.media_cache import MediaCache
    from mdame_domain.media_url import S3MediaUrl, parse_media_url
    from mdame_resources.media_s3 import S3MediaStore
    from tests.s3kit import raw_client

    bucket = request.getfixturevalue("s3_bucket")
    url = parse_media_url(bucket.url)
    assert isinstance(url, S3MediaUrl)
    yield S3MediaStore(url, raw_client(bucket.endpoint), MediaCache(tmp_path / "cache", 1 << 30, 0))


def _present(store: MediaStore, uri: str) -> bool:
    return store.problem(uri) is None


def test_policy_decides_collectable_and_housekeeping_deletes_exactly_that(
    state, owner, store: MediaStore, tmp_path: Path
) -> None:
    seeded = seed(owner, store, tmp_path)
    by_uri = {uri: name for name, uri in seeded.uris.items()}
    listed = state.collectable_media(POLICY.to_json())
    assert {by_uri[item.uri] for item in listed} == seeded.collectable
    reasons = {by_uri[item.uri]: item for item in listed}
    assert (
        reasons["render_old"].kind == "render"
        and "renders kept 30 days" in reasons["render_old"].reason
    )
    assert reasons["thumb_old"].kind == "thumbnail"
    assert reasons["sheet_old"].kind == "thumbnail"  # a contact sheet: an image of the render

    report = collect_media(state, store, POLICY, "test")
    assert {by_uri[item["uri"]] for item in report.collected} == seeded.collectable
    assert report.freed_bytes == sum(seeded.sizes[name] for name in seeded.collectable)
    for name, uri in seeded.uris.items():
        assert _present(store, uri) == (name not in seeded.collectable), name
    # Collected on purpose: recorded, and the expired cache entry naming it is gone.
    states = dict(owner.execute("SELECT uri, state FROM mdame.media_collections").fetchall())
    assert {by_uri[u] for u, s in states.items() if s == "collected"} == seeded.collectable
    assert not owner.execute(
        "SELECT 1 FROM mdame.scene_cache WHERE uri = %s", [seeded.uris["clip_old"]]
    ).fetchall()
    # Idempotent: nothing left to collect, nothing else touched.
    assert state.collectable_media(POLICY.to_json()) == []
    again = collect_media(state, store, POLICY, "test")
    assert again.collected == [] and again.failed == []
    assert all(_present(store, seeded.uris[name]) for name in seeded.needed())


def test_per_dimension_days_and_needed_objects_are_refused(state, owner, tmp_path: Path) -> None:
    store = LocalMediaStore(tmp_path / "media")
    seeded = seed(owner, store, tmp_path)
    keep_all = RetentionPolicy(
        render_days=30, voice_days=7, dimensions={"tech": RetentionSettings(3650, 3650)}
    )
    names = {seeded.uris[n]: n for n in seeded.uris}
    assert {names[i.uri] for i in state.collectable_media(keep_all.to_json())} == {
        "clip_old",
        "clip_recent",
    }
    # Asked directly, a needed object is refused with what needs it; an orphan too.
    start = state.begin_media_collection(seeded.uris["clip_shared"], POLICY.to_json(), "t")
    assert not start.collect and "is not finished" in start.reason
    start = state.begin_media_collection(seeded.uris["clip_cached"], POLICY.to_json(), "t")
    assert not start.collect and "live until" in start.reason
    start = state.begin_media_collection(seeded.uris["orphan"], POLICY.to_json(), "t")
    assert not start.collect and start.reason == "no row names it"
    with pytest.raises(NotFound):
        state.finish_media_collection(seeded.uris["clip_shared"], 0)


@pytest.mark.parametrize(
    "policy",
    [
        {"render_days": 30},
        {"render_days": -1, "voice_days": 7},
        {"render_days": 1.5, "voice_days": 7},
        {"render_days": "30", "voice_days": 7},
        {"render_days": 30, "voice_days": 7, "dimensions": {"tech": {"voice_days": 99999}}},
        {"render_days": 30, "voice_days": 7, "dimensions": []},
    ],
)
def test_bad_policies_are_refused(state, policy) -> None:
    with pytest.raises(InvalidInput):
        state.collectable_media(policy)


def test_bad_uris_are_refused(state) -> None:
    for uri in ("", "file:///etc/passwd", "media://sha256/abc.mp4"):
        with pytest.raises(InvalidInput):
            state.begin_media_collection(uri, POLICY.to_json(), "t")
        with pytest.raises(InvalidInput):
            state.abandon_media_collection(uri)


def test_no_row_can_start_naming_an_object_being_collected(state, owner, tmp_path: Path) -> None:
    store = LocalMediaStore(tmp_path / "media")
    seeded = seed(owner, store, tmp_path)
    uri = seeded.uris["clip_old"]
    sha = uri.rsplit("/", 1)[1].split(".")[0]
    assert state.begin_media_collection(uri, POLICY.to_json(), "t").collect
    # A clip step that generated the same bytes again and records them: refused, retried later.
    with pytest.raises(StateConflict, match="being collected"):
        as_admin(state).put_scene_cache("new-scene", uri, sha, 3600)
    store.delete(uri)
    assert state.finish_media_collection(uri, 1)
    assert not state.finish_media_collection(uri, 1)  # already done
    # Once collected, naming it is refused until put_file records that its bytes are back
    # (a plain put_file cannot tell a fresh copy from one the collector was about to delete).
    _put(store, tmp_path, "clip_old", ".mp4")
    with pytest.raises(MediaCollected, match="was collected by housekeeping"):
        as_admin(state).put_scene_cache("new-scene", uri, sha, 3600)
    src = tmp_path / "clip_old.mp4"
    assert store.put_file(src, ".mp4", registry=state).uri == uri
    as_admin(state).put_scene_cache("new-scene", uri, sha, 3600)
    assert not owner.execute(
        "SELECT 1 FROM mdame.media_collections WHERE uri = %s", [uri]
    ).fetchall()
    assert uri not in {i.uri for i in state.collectable_media(POLICY.to_json())}


def _collect_one(state, store: MediaStore, uri: str) -> None:
    """The collector's three steps for one object (what collect_media does for each)."""
    assert state.begin_media_collection(uri, POLICY.to_json(), "collector").collect
    store.delete(uri)
    assert state.finish_media_collection(uri, 1)


def _mark(owner: psycopg.Connection, uri: str) -> list:
    return owner.execute(
        "SELECT state FROM mdame.media_collections WHERE uri = %s", [uri]
    ).fetchall()


def test_a_writer_storing_an_object_while_it_is_collected_leaves_it_live(
    state, owner, store: MediaStore, tmp_path: Path
) -> None:
    """The collector marks the object, a writer stores the same bytes (put_file finds them
    still there and skips the upload), the collector deletes them and finishes, and the
    writer names the object: the row must name bytes that are there."""
    seeded = seed(owner, store, tmp_path)
    uri = seeded.uris["clip_old"]
    src = tmp_path / "clip_old.mp4"  # the writer's clip: the same bytes, made again
    sha = uri.rsplit("/", 1)[1].split(".")[0]
    assert state.begin_media_collection(uri, POLICY.to_json(), "collector").collect
    stored = store.put_file(src, ".mp4", registry=state)
    assert stored.uri == uri
    store.delete(uri)
    assert state.finish_media_collection(uri, 1)
    entry = name_stored(
        state,
        store,
        lambda: as_admin(state).put_scene_cache("again", stored.uri, stored.sha256, 3600),
        [(src, ".mp4")],
    )
    assert entry.uri == uri
    assert store.problem(uri, sha) is None
    assert store.verified_path(uri, sha).read_bytes() == src.read_bytes()
    assert _mark(owner, uri) == []  # live: nothing records it collected
    assert uri not in {i.uri for i in state.collectable_media(POLICY.to_json())}
    [event] = owner.execute(
        "SELECT detail ->> 'uri' FROM mdame.events WHERE event = 'stored_again'"
    ).fetchall()
    assert event == (uri,)


def test_a_writer_refused_during_a_collection_stores_the_bytes_again_on_retry(
    state, owner, store: MediaStore, tmp_path: Path
) -> None:
    seeded = seed(owner, store, tmp_path)
    uri = seeded.uris["clip_old"]
    src = tmp_path / "clip_old.mp4"
    sha = uri.rsplit("/", 1)[1].split(".")[0]
    assert state.begin_media_collection(uri, POLICY.to_json(), "collector").collect
    stored = store.put_file(src, ".mp4", registry=state)
    with pytest.raises(StateConflict, match="being collected") as refused:
        as_admin(state).put_scene_cache("again", stored.uri, stored.sha256, 3600)
    assert not isinstance(refused.value, MediaCollected)  # wait, do not store again yet
    # Storing it again now would be deleted with the rest: refused too.
    marked = state.media_collection_mark(uri)
    assert marked is not None and marked.state == "collecting"
    with pytest.raises(StateConflict, match="being collected"):
        state.media_stored_again(uri, datetime.now(UTC))
    store.delete(uri)
    assert state.finish_media_collection(uri, 1)
    # The step's retry: put_file sees the collection and stores the bytes again.
    stored = store.put_file(src, ".mp4", registry=state)
    as_admin(state).put_scene_cache("again", stored.uri, stored.sha256, 3600)
    assert store.problem(uri, sha) is None
    assert _mark(owner, uri) == []


def test_stored_again_counts_only_for_the_collection_it_saw(state, owner, tmp_path: Path) -> None:
    """An upload made before a later collection deleted the bytes does not revive it."""
    store = LocalMediaStore(tmp_path / "media")
    seeded = seed(owner, store, tmp_path)
    uri = seeded.uris["clip_old"]
    _collect_one(state, store, uri)
    first = state.media_collection_mark(uri)
    assert first is not None and first.state == "collected" and first.collected_at is not None
    _put(store, tmp_path, "clip_old", ".mp4")
    assert state.media_stored_again(uri, first.collected_at)
    assert state.media_collection_mark(uri) is None
    assert state.media_stored_again(uri, first.collected_at)  # another writer was first
    # Nothing new names it: collected again, and the first upload is gone with it.
    _collect_one(state, store, uri)
    assert not state.media_stored_again(uri, first.collected_at)
    assert _mark(owner, uri) == [("collected",)]
    # put_file with the registry stores it again for the collection it sees now.
    store.put_file(tmp_path / "clip_old.mp4", ".mp4", registry=state)
    assert _mark(owner, uri) == [] and _present(store, uri)
    with pytest.raises(InvalidInput, match="collected_at"):
        state.call("media_stored_again", uri, None)


def test_a_reference_committing_meanwhile_is_seen_under_the_lock(
    state, owner, fresh_db, tmp_path: Path
) -> None:
    """No write skew: begin_media_collection waits for a writer naming the object, then sees
    its row, so the object is kept."""
    store = LocalMediaStore(tmp_path / "media")
    seeded = seed(owner, store, tmp_path)
    uri = seeded.uris["clip_old"]
    sha = uri.rsplit("/", 1)[1].split(".")[0]
    answers: list = []
    with psycopg.connect(fresh_db.owner) as writer:  # one open transaction
        writer.execute(
            "INSERT INTO mdame.scene_cache (scene_hash, uri, content_sha256, expires_at) "
            "VALUES ('racing', %s, %s, now() + interval '1 day')",
            [uri, sha],
        )
        thread = threading.Thread(
            target=lambda: answers.append(state.begin_media_collection(uri, POLICY.to_json(), "t"))
        )
        thread.start()
        time.sleep(0.5)
        assert thread.is_alive(), "begin_media_collection must wait for the writer's lock"
        writer.commit()
    thread.join(10)
    assert not answers[0].collect and "live until" in answers[0].reason
    assert _present(store, uri)


class Crash(Exception):
    pass


def test_a_run_stopped_midway_converges(state, owner, tmp_path: Path) -> None:
    store = LocalMediaStore(tmp_path / "media")
    seeded = seed(owner, store, tmp_path)
    names = {uri: name for name, uri in seeded.uris.items()}

    def crash_at_finish(rpc: str, when: str) -> None:
        if rpc == "finish_media_collection" and when == "before":
            raise Crash

    set_commit_observer(crash_at_finish)
    try:
        with pytest.raises(Crash):
            collect_media(state, store, POLICY, "first")
    finally:
        set_commit_observer(None)
    [(uri, marked)] = owner.execute("SELECT uri, state FROM mdame.media_collections").fetchall()
    assert marked == "collecting" and not _present(store, uri)  # bytes gone, not yet recorded
    [first] = state.collectable_media(POLICY.to_json(), 1)
    assert (first.uri, first.state) == (uri, "collecting")  # finished first next time
    report = collect_media(state, store, POLICY, "second")
    assert {names[i["uri"]] for i in report.collected} == seeded.collectable
    assert state.collectable_media(POLICY.to_json()) == []
    assert all(_present(store, seeded.uris[n]) for n in seeded.needed())


class _RefusingStore(LocalMediaStore):
    """A store whose deletes are refused (a read-only mount, a bucket policy): the fault
    sits at the storage boundary, the collection logic under test is the real one."""

    def delete(self, uri: str) -> int | None:
        raise PermissionError(f"read-only: {uri}")


def test_a_failed_delete_of_bytes_still_there_is_abandoned(state, owner, tmp_path: Path) -> None:
    store = _RefusingStore(tmp_path / "media")
    seeded = seed(owner, store, tmp_path)
    report = collect_media(state, store, POLICY, "t")
    assert report.collected == []
    assert {f["uri"] for f in report.failed} == {seeded.uris[n] for n in seeded.collectable}
    assert all(_present(store, uri) for uri in seeded.uris.values())
    # The marks went with the failure: rows may name the objects again, the next run retries.
    assert not owner.execute("SELECT 1 FROM mdame.media_collections").fetchall()
    assert len(state.collectable_media(POLICY.to_json())) == len(seeded.collectable)


def test_housekeeping_asset_collects_frees_bytes_and_alerts_low_disk(
    owner, fresh_db, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("MDAME_HOME", str(home))
    monkeypatch.delenv("MDAME_MEDIA_ROOT", raising=False)
    monkeypatch.delenv("MDAME_MEDIA_URL", raising=False)
    monkeypatch.setenv("MDAME_DISK_LOW_PERCENT", "100")  # always low: the alert path runs
    store = LocalMediaStore(home / "media")
    (tmp_path / "src").mkdir()
    seeded = seed(owner, store, tmp_path / "src")
    resources = {
        "state": StateStoreResource(database_url=fresh_db.app),
        "media": MediaStoreResource(),
        "notifier": OutboxNotifier(),
    }
    try:
        first = dg.materialize([housekeeping], resources=resources)
        second = dg.materialize([housekeeping], resources=resources)
    finally:
        close_clients()
    meta = first.asset_materializations_for_node("housekeeping")[0].metadata
    assert meta["collected"].value == len(seeded.collectable)
    assert meta["freed_bytes"].value == sum(seeded.sizes[n] for n in seeded.collectable)
    assert "GiB free" in meta["disk_low"].value
    # The alert went through the alerts slice: once (the second run's is today's duplicate).
    assert meta["disk_low_alert"].value == "sent"
    assert (
        second.asset_materializations_for_node("housekeeping")[0].metadata["disk_low_alert"].value
        == "duplicate"
    )
    [line] = (home / "outbox" / "telegram" / "_global.jsonl").read_text().splitlines()
    assert "disk space low" in json.loads(line)["text"]
    usage = meta["disk_bytes"].value
    assert usage["media_clips"] > 0 and usage["free"] > 0
    for name, uri in seeded.uris.items():
        assert _present(store, uri) == (name not in seeded.collectable), name
    again = second.asset_materializations_for_node("housekeeping")[0].metadata
    assert again["collected"].value == 0 and again["freed_bytes"].value == 0
