"""The bounded cache of verified media copies that readers of a remote store keep."""

from __future__ import annotations

import hashlib
import os
import time

import pytest

from mdame_domain.media_cache import MediaCache


def _admit(cache: MediaCache, data: bytes, suffix: str = ".bin"):
    sha = hashlib.sha256(data).hexdigest()
    with cache.incoming(sha, suffix) as (out, temp):
        out.write(data)
        out.flush()
        return cache.admit(temp, sha, suffix), sha


def test_a_verified_copy_is_served_and_a_rotted_one_removed(tmp_path):
    cache = MediaCache(tmp_path, 1 << 20, grace_s=0)
    path, sha = _admit(cache, b"clip bytes")
    assert cache.verified(sha, ".bin") == path
    path.write_bytes(b"clip bytez")
    assert cache.verified(sha, ".bin") is None and not path.exists()
    assert cache.verified("ab" * 32, ".bin") is None


def test_an_abandoned_download_leaves_no_file_under_a_real_name(tmp_path):
    cache = MediaCache(tmp_path, 1 << 20, grace_s=0)
    sha = hashlib.sha256(b"whole").hexdigest()
    with pytest.raises(ConnectionError), cache.incoming(sha, ".mp4") as (out, _):
        out.write(b"who")
        raise ConnectionError("connection dropped mid-download")
    assert list(tmp_path.rglob("*")) == [tmp_path / sha[:2]]  # only the folder
    assert cache.verified(sha, ".mp4") is None


def test_stale_temp_files_of_crashed_processes_are_swept(tmp_path):
    cache = MediaCache(tmp_path, 1 << 20, grace_s=0)
    (tmp_path / "ab").mkdir()
    stale, fresh = tmp_path / "ab" / ".incoming-dead", tmp_path / "ab" / ".incoming-live"
    stale.write_bytes(b"half")
    fresh.write_bytes(b"half")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    cache.evict()
    assert not stale.exists() and fresh.exists()


def test_eviction_drops_least_recently_used_but_spares_the_grace_period(tmp_path):
    cache = MediaCache(tmp_path, 250, grace_s=0)
    a, _ = _admit(cache, b"a" * 100)
    b, _ = _admit(cache, b"b" * 100)
    os.utime(a, (1_000, 1_000))
    os.utime(b, (2_000, 2_000))
    c, _ = _admit(cache, b"c" * 100)
    assert not a.exists() and b.exists() and c.exists()

    patient = MediaCache(tmp_path, 150, grace_s=3600)  # everything was just used
    d, _ = _admit(patient, b"d" * 100)
    assert c.exists() and d.exists()  # over the cap, but in use: the cap is soft
    assert not b.exists()  # used long ago: gone


def test_the_cap_must_be_positive(tmp_path):
    with pytest.raises(ValueError, match="positive"):
        MediaCache(tmp_path, 0)
