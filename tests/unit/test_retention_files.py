"""Retention on the file side (issue 12): scratch files are cleaned by their step and swept
after a kill, the outbox links the render instead of copying it, disk use is measured by
kind, and the retention settings are validated."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import yaml

from mdame_domain.dimensions import DimensionConfigError, dimension_from_json, parse_dimension
from mdame_domain.media_store import LocalMediaStore, sha256_file
from mdame_domain.outbox import VIDEO_NAME, link_or_copy, publish_to_outbox
from mdame_domain.retention import (
    USAGE_KEYS,
    DiskThreshold,
    RetentionConfigError,
    RetentionSettings,
    disk_threshold,
    disk_usage_by_kind,
    retention_policy,
)
from mdame_domain.scratch import owned_dir, owner_name, scratch_space, sweep_scratch
from mdame_resources.media import MediaStoreResource

REPO = Path(__file__).resolve().parents[2]

# A step's process: takes its scratch folder, writes a partial file, says so, and hangs.
CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from mdame_domain.scratch import owned_dir
    folder = owned_dir(Path(sys.argv[1]), "render")
    (folder / "video.mp4").write_bytes(b"x" * 4096)
    print(folder, flush=True)
    time.sleep(60)
    """
)


def _spawn(root: Path) -> tuple[subprocess.Popen, Path]:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(root)], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    assert child.stdout is not None
    return child, Path(child.stdout.readline().strip())


def test_a_killed_steps_scratch_is_swept_and_a_live_ones_kept(tmp_path: Path) -> None:
    root = tmp_path / "scratch"
    killed, killed_dir = _spawn(root)
    live, live_dir = _spawn(root)
    try:
        os.kill(killed.pid, signal.SIGKILL)
        killed.wait(10)
        # Files of the layout before owner folders: only once they are old.
        legacy_old, legacy_new = root / "voice" / "old.wav", root / "voice" / "new.wav"
        legacy_old.parent.mkdir(parents=True)
        legacy_old.write_bytes(b"o" * 100)
        legacy_new.write_bytes(b"n" * 100)
        os.utime(legacy_old, (time.time() - 7 * 3600,) * 2)
        mine = owned_dir(root, "clips")
        (mine / "partial.mp4").write_bytes(b"p")

        removed, freed = sweep_scratch(root)
        assert set(removed) == {killed_dir, legacy_old}
        assert freed == 4096 + 100
        assert not killed_dir.exists() and not legacy_old.exists()
        assert (live_dir / "video.mp4").exists() and legacy_new.exists()
        assert (mine / "partial.mp4").exists()  # this process is alive too
        # A folder named for a process of another host: kept until it is old.
        other = root / "render" / "elsewhere~1~1"
        other.mkdir()
        (other / "f").write_bytes(b"f")
        assert sweep_scratch(root)[0] == []
        later = sweep_scratch(root, now=time.time() + 7 * 3600)[0]
        assert set(later) == {other, legacy_new}  # untouched for 7 hours by then
    finally:
        live.kill()
        live.wait(10)
    assert sweep_scratch(root)[0] == [live_dir]


# A voice step's process as the pipeline runs it: scratch through the media resource.
STEP = textwrap.dedent(
    """
    import time
    from mdame_resources.media import MediaStoreResource
    wav = MediaStoreResource().scratch_dir("voice") / "script-1.wav"
    wav.write_bytes(b"w" * 1000)
    print(wav, flush=True)
    time.sleep(60)
    """
)


def test_the_next_step_sweeps_what_a_sigkilled_step_left(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MDAME_HOME", str(tmp_path / "home"))
    child = subprocess.Popen(
        [sys.executable, "-c", STEP], stdout=subprocess.PIPE, text=True, cwd=REPO
    )
    assert child.stdout is not None
    wav = Path(child.stdout.readline().strip())
    assert wav.exists()
    child.send_signal(signal.SIGKILL)
    child.wait(10)
    assert wav.exists()  # a SIGKILL runs no cleanup
    # The next step to ask for scratch space (any step, any name) sweeps it first.
    with MediaStoreResource().scratch_space("render") as work:
        assert work.is_dir()
    assert not wav.parent.exists()


def test_scratch_space_is_removed_on_success_and_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with scratch_space(tmp_path, "render") as work:
        (work / "video.mp4").write_bytes(b"v")
    assert not work.exists()
    with pytest.raises(RuntimeError), scratch_space(tmp_path, "render") as work:
        (work / "video.mp4").write_bytes(b"v")
        raise RuntimeError("ffmpeg failed")
    assert not work.exists()
    assert work.parent.name == owner_name()
    # The resource's scratch lives under $MDAME_HOME/scratch/<step>/<owner>.
    monkeypatch.setenv("MDAME_HOME", str(tmp_path / "home"))
    folder = MediaStoreResource().scratch_dir("voice")
    assert folder == tmp_path / "home" / "scratch" / "voice" / owner_name()
    with pytest.raises(ValueError):
        owned_dir(tmp_path, "../escape")


def test_the_outbox_links_the_render_and_stays_byte_identical(tmp_path: Path) -> None:
    store = LocalMediaStore(tmp_path / "media")
    source = tmp_path / "render.mp4"
    source.write_bytes(os.urandom(50_000))
    stored = store.put_file(source, ".mp4")
    thumb = tmp_path / "t.jpg"
    thumb.write_bytes(b"jpeg")
    metadata = {"published_at": "2026-11-29T00:00:00+00:00", "render_sha256": stored.sha256}
    entry = publish_to_outbox(tmp_path / "outbox", "tech", "vid1", stored.path, metadata, thumb)
    assert entry.video_path.stat().st_ino == stored.path.stat().st_ino
    assert sha256_file(entry.video_path) == stored.sha256
    # Collecting the stored render later leaves the published video whole.
    store.delete(stored.uri)
    assert sha256_file(entry.video_path) == stored.sha256
    # Disk use counts the shared bytes once.
    other = tmp_path / "media2"
    usage = disk_usage_by_kind(tmp_path, other)
    assert usage["outbox"] == 50_000 + len(b"jpeg") + entry.metadata_path.stat().st_size


def test_link_or_copy_copies_across_filesystems(tmp_path: Path, caplog) -> None:
    shm = Path("/dev/shm")
    if not shm.is_dir() or shm.stat().st_dev == tmp_path.stat().st_dev:
        pytest.skip("no second filesystem to link across")
    source = tmp_path / "a.mp4"
    source.write_bytes(b"abc" * 1000)
    target = shm / f"mdame-link-test-{os.getpid()}.mp4"
    try:
        assert link_or_copy(source, target) is False
        assert target.read_bytes() == source.read_bytes()
        assert target.stat().st_ino != source.stat().st_ino
    finally:
        target.unlink(missing_ok=True)
    assert link_or_copy(source, tmp_path / "b.mp4") is True


def test_disk_usage_by_kind(tmp_path: Path) -> None:
    home = tmp_path
    store = LocalMediaStore(home / "media")
    made = {}
    for name, suffix, size in [
        ("clip", ".mp4", 1000),
        ("voice", ".wav", 300),
        ("render", ".mp4", 5000),
        ("thumb", ".jpg", 70),
    ]:
        path = tmp_path / f"{name}{suffix}"
        path.write_bytes(name.encode() * (size // len(name)) + b"." * (size % len(name)))
        made[name] = store.put_file(path, suffix)
    digest = "0" * 64
    store.remember_derived("render", digest, made["render"])
    store.remember_derived("thumbnail", digest, made["thumb"])
    (home / "scratch" / "x").mkdir(parents=True)
    (home / "scratch" / "x" / "f").write_bytes(b"s" * 10)
    (home / "dagster").mkdir()
    (home / "dagster" / "runs.db").write_bytes(b"d" * 20)
    (home / "outbox" / "tech" / "v").mkdir(parents=True)
    os.link(made["render"].path, home / "outbox" / "tech" / "v" / VIDEO_NAME)
    usage = disk_usage_by_kind(home)
    assert tuple(usage) == USAGE_KEYS
    assert usage["media_clips"] == 1000 and usage["media_voice"] == 300
    assert usage["media_renders"] == 5000 and usage["media_thumbnails"] == 70
    assert usage["media_other"] == 2 * len(made["render"].uri)  # the two memos
    assert usage["scratch"] == 10 and usage["dagster_storage"] == 20
    assert usage["outbox"] == 0  # a hard link of a counted render
    assert usage["free"] > 0


def test_retention_settings_are_validated() -> None:
    base = yaml.safe_load((REPO / "dimensions" / "tech.yaml").read_text(encoding="utf-8"))
    config = parse_dimension({**base, "retention": {"render_days": 60}}, "tech.yaml")
    assert config.retention == RetentionSettings(render_days=60)
    assert dimension_from_json(config.to_json()).retention == config.retention
    assert parse_dimension(base, "tech.yaml").retention == RetentionSettings()
    for bad, field in [
        ({"render_days": -1}, "retention.render_days"),
        ({"voice_days": "7"}, "retention.voice_days"),
        ({"voice_days": True}, "retention.voice_days"),
        ({"keep": 1}, "retention.keep"),
    ]:
        with pytest.raises(DimensionConfigError, match=field.replace(".", r"\.")):
            parse_dimension({**base, "retention": bad}, "tech.yaml")
    policy = retention_policy([("tech", config.retention)], {"MDAME_RETENTION_VOICE_DAYS": "2"})
    assert policy.to_json() == {
        "render_days": 30,
        "voice_days": 2,
        "dimensions": {"tech": {"render_days": 60}},
    }
    with pytest.raises(RetentionConfigError, match="MDAME_RETENTION_RENDER_DAYS"):
        retention_policy([], {"MDAME_RETENTION_RENDER_DAYS": "forever"})
    assert disk_threshold({}) == DiskThreshold()
    assert disk_threshold({"MDAME_DISK_LOW_BYTES": "1024"}).low_bytes == 1024
    with pytest.raises(RetentionConfigError, match="MDAME_DISK_LOW_PERCENT"):
        disk_threshold({"MDAME_DISK_LOW_PERCENT": "150"})
    assert DiskThreshold(10, 10).problem(free=5, total=1000) is not None
    assert DiskThreshold(10, 10).problem(free=500, total=1000) is None
