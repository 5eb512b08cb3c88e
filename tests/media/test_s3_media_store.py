"""The S3 backend of the media store against moto's S3 server, through real boto3."""

from __future__ import annotations

import hashlib
import os
from collections import Counter
from pathlib import Path

import pytest

from mdame_domain.media_cache import MediaCache
from mdame_domain.media_store import LocalMediaStore, MediaProblem, MediaStore, parse_media_uri
from mdame_domain.media_url import S3MediaUrl, parse_media_url
from mdame_resources.media import MediaStoreResource
from mdame_resources.media_s3 import MediaStoreUnavailable, S3MediaStore, s3_client
from tests.s3kit import S3Bucket, raw_client


class Host:
    """One host's view of the bucket: its own boto3 client (with a request counter on it) and
    its own cache folder, as a GPU worker and the orchestrator each have."""

    def __init__(self, bucket: S3Bucket, cache_dir: Path, cache_bytes: int = 1 << 30):
        url = parse_media_url(bucket.url)
        assert isinstance(url, S3MediaUrl)
        self.calls: Counter[str] = Counter()
        client = raw_client(bucket.endpoint)
        client.meta.events.register("before-call.s3", self._count)
        self.store = S3MediaStore(url, client, MediaCache(cache_dir, cache_bytes, grace_s=0))

    def _count(self, model, **_):
        self.calls[model.name] += 1


def _file(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(data)
    return path


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@pytest.fixture
def host(s3_bucket, tmp_path) -> Host:
    return Host(s3_bucket, tmp_path / "cache-a")


def test_put_then_read_back_on_another_host(s3_bucket, host, tmp_path):
    data = os.urandom(50_000)
    stored = host.store.put_file(_file(tmp_path / "src", "clip.mp4", data), ".mp4")

    sha = _sha(data)
    assert stored.uri == f"media://sha256/{sha}.mp4" and stored.sha256 == sha
    assert stored.size == len(data) and stored.path.read_bytes() == data  # the verified copy
    assert s3_bucket.keys() == [f"media/{sha[:2]}/{sha}.mp4"]
    assert s3_bucket.body(f"media/{sha[:2]}/{sha}.mp4") == data
    assert host.store.location(stored.uri) == f"s3://{s3_bucket.name}/media/{sha[:2]}/{sha}.mp4"
    assert isinstance(host.store, MediaStore) and host.store.exists(sha)
    assert not host.store.exists("0" * 64)

    other = Host(s3_bucket, tmp_path / "cache-b")
    assert other.store.problem(stored.uri, sha) is None
    path = other.store.verified_path(stored.uri, sha)
    assert path.read_bytes() == data and path.is_relative_to(tmp_path / "cache-b")
    # The same URI means the same bytes in the local backend: rows are backend-independent.
    local = LocalMediaStore(tmp_path / "local").put_file(path, ".mp4")
    assert local.uri == stored.uri


def test_same_bytes_twice_upload_once(s3_bucket, host, tmp_path):
    source = _file(tmp_path / "src", "voice.wav", os.urandom(20_000))

    first = host.store.put_file(source, ".wav")
    again = host.store.put_file(source, ".wav")
    other = Host(s3_bucket, tmp_path / "cache-b")  # a host with no cache copy: reads it back
    third = other.store.put_file(source, ".wav")

    assert first == again and first.uri == third.uri
    assert host.calls["PutObject"] == 1 and other.calls["PutObject"] == 0
    assert host.calls["HeadObject"] == 2 and other.calls["HeadObject"] == 1
    assert other.calls["GetObject"] == 1
    assert len(s3_bucket.keys()) == 1


def test_an_object_spoiled_after_upload_fails_verification(s3_bucket, host, tmp_path):
    data = os.urandom(30_000)
    source = _file(tmp_path / "src", "clip.mp4", data)
    key = f"media/{_sha(data)[:2]}/{_sha(data)}.mp4"

    def spoil(**_):  # another writer, or rot in the server, between our PUT and its check
        s3_bucket.overwrite(key, os.urandom(len(data)))

    host.store.client.meta.events.register("after-call.s3.PutObject", spoil)
    with pytest.raises(MediaProblem, match="failed verification after upload"):
        host.store.put_file(source, ".mp4")
    host.store.client.meta.events.unregister("after-call.s3.PutObject", spoil)

    # No result to record, and no cache copy of bytes that were never verified.
    uri = f"media://sha256/{_sha(data)}.mp4"
    assert not host.store.cache_path(uri).exists()
    assert list((tmp_path / "cache-a").rglob("*.incoming-*")) == []
    assert "is corrupt" in (host.store.problem(uri) or "")
    # The next put of those bytes reads the object back, finds it wrong, and uploads again.
    assert host.store.put_file(source, ".mp4").uri == uri
    assert s3_bucket.body(key) == data and host.store.problem(uri) is None


def test_a_missing_remote_object_is_named_even_with_a_cache_copy(s3_bucket, host, tmp_path):
    stored = host.store.put_file(_file(tmp_path / "src", "a.wav", b"voice " * 500), ".wav")
    sha, _ = parse_media_uri(stored.uri)
    s3_bucket.delete(f"media/{sha[:2]}/{sha}.wav")

    problem = host.store.problem(stored.uri, stored.sha256)

    assert problem == (
        f"{stored.uri} is missing from the media store "
        f"(s3://{s3_bucket.name}/media/{sha[:2]}/{sha}.wav)"
    )
    # Readers on this host still have verified bytes: the cache copy is fine to use.
    assert host.store.verified_path(stored.uri).read_bytes() == b"voice " * 500
    other = Host(s3_bucket, tmp_path / "cache-b")
    with pytest.raises(MediaProblem, match="is missing from the media store"):
        other.store.verified_path(stored.uri)


def test_a_remote_object_rotted_is_caught_by_a_host_without_a_copy(s3_bucket, host, tmp_path):
    data = os.urandom(10_000)
    stored = host.store.put_file(_file(tmp_path / "src", "c.mp4", data), ".mp4")
    s3_bucket.overwrite(f"media/{stored.sha256[:2]}/{stored.sha256}.mp4", data[:5000])
    other = Host(s3_bucket, tmp_path / "cache-b")

    problem = other.store.problem(stored.uri)

    assert problem is not None and problem.startswith(f"{stored.uri} is corrupt")
    assert not other.store.cache_path(stored.uri).exists()  # bad bytes never enter a cache
    with pytest.raises(MediaProblem, match="is corrupt"):
        other.store.verified_path(stored.uri)
    assert host.store.problem(stored.uri) is not None  # the size changed: the HEAD tells


def test_recorded_hash_other_than_the_name_is_a_problem(host, tmp_path):
    stored = host.store.put_file(_file(tmp_path / "src", "d.wav", b"d" * 100), ".wav")
    assert "not its name's" in (host.store.problem(stored.uri, "ab" * 32) or "")
    with pytest.raises(MediaProblem, match="not its name's"):
        host.store.verified_path(stored.uri, "ab" * 32)


def test_a_corrupted_cache_copy_is_fetched_again(host, tmp_path):
    data = os.urandom(8_000)
    stored = host.store.put_file(_file(tmp_path / "src", "e.mp4", data), ".mp4")
    copy = host.store.cache_path(stored.uri)
    copy.write_bytes(data[:100] + b"rot" + data[103:])
    gets = host.calls["GetObject"]

    path = host.store.verified_path(stored.uri, stored.sha256)

    assert path == copy and path.read_bytes() == data
    assert host.calls["GetObject"] == gets + 1
    host.store.verified_path(stored.uri)  # a good copy is used without asking the server
    assert host.calls["GetObject"] == gets + 1


def test_the_cache_stays_under_its_cap_dropping_the_least_recently_used(s3_bucket, tmp_path):
    writer = Host(s3_bucket, tmp_path / "writer")
    uris = [
        writer.store.put_file(_file(tmp_path / "src", f"{i}.bin", os.urandom(1000)), ".bin").uri
        for i in range(4)
    ]
    reader = Host(s3_bucket, tmp_path / "reader", cache_bytes=2500)  # room for two
    first = reader.store.verified_path(uris[0])
    os.utime(first, (1_000_000, 1_000_000))  # used long ago
    second = reader.store.verified_path(uris[1])
    os.utime(second, (2_000_000, 2_000_000))
    reader.store.verified_path(uris[0])  # used again now: the most recent

    third = reader.store.verified_path(uris[2])

    cached = sorted(p.name for p in (tmp_path / "reader").rglob("*.bin"))
    assert cached == sorted([first.name, third.name])  # the second was the least recent
    assert sum(p.stat().st_size for p in (tmp_path / "reader").rglob("*.bin")) <= 2500
    gets = reader.calls["GetObject"]
    assert reader.store.verified_path(uris[1]).exists()  # evicted: fetched again
    assert reader.calls["GetObject"] == gets + 1


def test_derived_outputs_are_remembered_in_the_bucket(s3_bucket, host, tmp_path):
    digest = "cd" * 32
    assert host.store.find_derived("render", digest) is None
    stored = host.store.put_file(_file(tmp_path / "src", "r.mp4", os.urandom(4000)), ".mp4")

    host.store.remember_derived("render", digest, stored)

    assert s3_bucket.body(f"media/derived/render/{digest}") == stored.uri.encode()
    other = Host(s3_bucket, tmp_path / "cache-b")
    found = other.store.find_derived("render", digest)
    assert found is not None and found.uri == stored.uri and found.size == stored.size
    assert found.path.read_bytes() == stored.path.read_bytes()
    assert other.store.find_derived("render", "ef" * 32) is None
    s3_bucket.delete(f"media/{stored.sha256[:2]}/{stored.sha256}.mp4")
    assert Host(s3_bucket, tmp_path / "cache-c").store.find_derived("render", digest) is None
    s3_bucket.overwrite(f"media/derived/render/{digest}", b"not a uri")
    assert host.store.find_derived("render", digest) is None
    with pytest.raises(ValueError, match="kind"):
        host.store.find_derived("../x", digest)


def test_a_missing_bucket_is_an_outage_not_missing_media(s3_bucket, tmp_path):
    url = parse_media_url(s3_bucket.url.replace(s3_bucket.name, "no-such-bucket-here"))
    assert isinstance(url, S3MediaUrl)
    store = S3MediaStore(url, raw_client(s3_bucket.endpoint), MediaCache(tmp_path, 1 << 20))
    uri = f"media://sha256/{'ab' * 32}.mp4"

    with pytest.raises(MediaStoreUnavailable, match="no-such-bucket-here") as caught:
        store.problem(uri)
    assert "test-secret-not-secret" not in str(caught.value)
    with pytest.raises(MediaStoreUnavailable):
        store.put_file(_file(tmp_path / "src", "x.mp4", b"x"), ".mp4")


def test_the_resource_picks_the_backend_from_the_url(s3_bucket, tmp_path, monkeypatch):
    monkeypatch.setenv("MDAME_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("MDAME_MEDIA_ROOT", raising=False)
    monkeypatch.delenv("MDAME_MEDIA_URL", raising=False)
    local = MediaStoreResource().store()
    assert isinstance(local, LocalMediaStore) and local.root == tmp_path / "home" / "media"
    folder = MediaStoreResource(url=f"file://{tmp_path}/elsewhere").store()
    assert isinstance(folder, LocalMediaStore) and folder.root == tmp_path / "elsewhere"

    s3_bucket.apply(monkeypatch)
    monkeypatch.setenv("MDAME_MEDIA_CACHE_BYTES", "123456")
    remote = MediaStoreResource().store()
    assert isinstance(remote, S3MediaStore)
    assert remote.url.bucket == s3_bucket.name and remote.url.prefix == "media"
    assert remote.cache.root == tmp_path / "home" / "media-cache"
    assert remote.cache.max_bytes == 123456
    assert MediaStoreResource().store().client is remote.client  # one client per process
    assert s3_client(remote.url) is remote.client
    stored = remote.put_file(_file(tmp_path / "src", "f.wav", b"through env"), ".wav")
    assert remote.verified_path(stored.uri).read_bytes() == b"through env"

    monkeypatch.setenv("MDAME_MEDIA_CACHE_BYTES", "lots")
    with pytest.raises(ValueError, match="MDAME_MEDIA_CACHE_BYTES='lots' is not allowed"):
        MediaStoreResource().store()
