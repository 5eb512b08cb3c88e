"""The content-addressed local media store."""

from __future__ import annotations

import hashlib

import pytest

from mdame_domain.media_store import LocalMediaStore, parse_media_uri, sha256_file


def test_sha256_file_streams_large_files(tmp_path) -> None:
    data = bytes(range(256)) * 20_000  # 5 MB: several read chunks
    path = tmp_path / "big.bin"
    path.write_bytes(data)
    assert sha256_file(path) == hashlib.sha256(data).hexdigest()


def test_put_file_layout_and_uri(tmp_path) -> None:
    source = tmp_path / "clip.mp4"
    source.write_bytes(b"video bytes")
    store = LocalMediaStore(tmp_path / "store")
    stored = store.put_file(source, ".mp4")
    digest = hashlib.sha256(b"video bytes").hexdigest()
    assert stored.sha256 == digest and stored.size == len(b"video bytes")
    assert stored.uri == f"media://sha256/{digest}.mp4"
    assert stored.path == tmp_path / "store" / digest[:2] / f"{digest}.mp4"
    assert stored.path.read_bytes() == b"video bytes"
    assert store.path_for(stored.uri) == stored.path
    assert store.exists(digest)
    assert not store.exists("0" * 64)
    assert parse_media_uri(stored.uri) == (digest, ".mp4")


def test_put_file_is_idempotent_and_does_not_rewrite(tmp_path) -> None:
    store = LocalMediaStore(tmp_path / "store")
    first_source = tmp_path / "a.wav"
    first_source.write_bytes(b"same")
    second_source = tmp_path / "b.wav"
    second_source.write_bytes(b"same")
    first = store.put_file(first_source, ".wav")
    inode, mtime = first.path.stat().st_ino, first.path.stat().st_mtime_ns
    second = store.put_file(second_source, ".wav")
    assert second == first
    assert (second.path.stat().st_ino, second.path.stat().st_mtime_ns) == (inode, mtime)
    # Nothing but the stored file: no temp files left behind.
    assert [p.name for p in first.path.parent.iterdir()] == [first.path.name]


def test_a_damaged_copy_is_repaired(tmp_path) -> None:
    store = LocalMediaStore(tmp_path / "store")
    source = tmp_path / "a.bin"
    source.write_bytes(b"complete content")
    stored = store.put_file(source)
    stored.path.write_bytes(b"trunc")
    assert store.put_file(source).path.read_bytes() == b"complete content"


@pytest.mark.parametrize("uri", [
    "media://sha256/abc.mp4",
    "s3://bucket/key",
    f"media://sha256/{'a' * 64}/../../etc/passwd",
    f"media://sha256/{'A' * 64}.mp4",
])  # fmt: skip
def test_bad_uris_are_rejected(tmp_path, uri) -> None:
    with pytest.raises(ValueError):
        LocalMediaStore(tmp_path).path_for(uri)


@pytest.mark.parametrize("suffix", ["mp4", "/x", ".mp4/../..", ".a b"])
def test_bad_suffixes_are_rejected(tmp_path, suffix) -> None:
    source = tmp_path / "f"
    source.write_bytes(b"x")
    with pytest.raises(ValueError):
        LocalMediaStore(tmp_path / "store").put_file(source, suffix)


def test_derived_outputs_are_found_by_inputs_digest(tmp_path):
    store = LocalMediaStore(tmp_path / "store")
    source = tmp_path / "video.mp4"
    source.write_bytes(b"rendered bytes")
    digest = "ab" * 32
    assert store.find_derived("render", digest) is None

    stored = store.put_file(source, ".mp4")
    store.remember_derived("render", digest, stored)

    assert store.find_derived("render", digest) == stored
    assert store.find_derived("render", "cd" * 32) is None
    stored.path.unlink()  # a marker whose file is gone is a miss, not a broken hit
    assert store.find_derived("render", digest) is None
