"""The S3-compatible backend of the content-addressed media store (AWS S3, MinIO, Supabase
Storage, Cloudflare R2, GCS interop), for hosts that share media: GPU workers on one host write
clips that the render on another reads.

Object key: <prefix>/<sha[:2]>/<sha><suffix>; derived-output memos are small objects under
<prefix>/derived/<kind>/<inputs digest> holding the URI. URIs are the local store's
(media://sha256/...), so rows stay valid whichever backend holds the bytes.

Verification: put_file HEADs the key first and skips the PUT when an object of that size is
there and this host holds a verified copy of it (else it reads it back to decide); an object
housekeeping collected is uploaded again whatever is there. After a PUT
it GETs the object back, hashing it into the local cache, and returns only when those bytes
hash to the name. Reading back was chosen over server-side checksums
(x-amz-checksum-sha256 on PUT, ChecksumMode on HEAD) because it holds on every S3-compatible
server: moto 5.2 neither checks the PUT's checksum nor reports one on HEAD, and GCS interop has
no such checksums, so a checksum path could not be shown to work here. Measured on moto (20 MiB):
PUT 1.2 s, GET back and hash 0.14 s, HEAD 0.02 s. The read-back also leaves a verified copy in
the cache, where the next reader on this host (the render) finds it.

Credentials come from boto3's standard chain (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, a
profile, a role); they are never logged, and errors here name the bucket, key and endpoint only.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from typing import Any

from mdame_domain.media_cache import DEFAULT_GRACE_S, MediaCache, hash_copy
from mdame_domain.media_store import (
    MediaProblem,
    MediaRegistry,
    StoredMedia,
    _check_sha,
    _check_suffix,
    media_uri,
    parse_media_uri,
    put_registered,
    sha256_file,
)
from mdame_domain.media_url import S3MediaUrl

_KIND = re.compile(r"^[a-z0-9][a-z0-9_-]{0,63}$")
_MISSING_CODES = {"404", "NoSuchKey", "NotFound"}


class MediaStoreUnavailable(RuntimeError):
    """The object store could not be asked (unreachable, refused, no such bucket): not damage,
    so nothing is regenerated; the step fails and is retried."""


def _error_code(exc: Exception) -> str:
    response = getattr(exc, "response", None) or {}
    return str(response.get("Error", {}).get("Code", ""))


class S3MediaStore:
    """Content-addressed objects in one bucket under one prefix, read through a local cache.

    `client` is a boto3 S3 client (s3_client() gives the per-process shared one)."""

    def __init__(self, url: S3MediaUrl, client: Any, cache: MediaCache):
        self.url = url
        self.client = client
        self.cache = cache

    # -- keys ------------------------------------------------------------------------------
    def _key(self, sha256: str, suffix: str) -> str:
        return self.url.key(sha256[:2], f"{sha256}{suffix}")

    def location(self, uri: str) -> str:
        sha256, suffix = parse_media_uri(uri)
        return self.url.display(sha256[:2], f"{sha256}{suffix}")

    def cache_path(self, uri: str) -> Path:
        """Where this host keeps its cache copy of `uri` (present or not); for tests and tools."""
        sha256, suffix = parse_media_uri(uri)
        return self.cache.path(sha256, suffix)

    def _unavailable(self, action: str, key: str, exc: Exception) -> MediaStoreUnavailable:
        code = _error_code(exc) or type(exc).__name__
        where = f" at {self.url.endpoint_url}" if self.url.endpoint_url else ""
        return MediaStoreUnavailable(
            f"media store: {action} s3://{self.url.bucket}/{key}{where} failed ({code})"
        )

    # -- remote primitives -----------------------------------------------------------------
    def _head_size(self, key: str) -> int | None:
        """The object's size, or None when there is no such object."""
        try:
            head = self.client.head_object(Bucket=self.url.bucket, Key=key)
        except Exception as exc:
            if _error_code(exc) not in _MISSING_CODES:
                raise self._unavailable("HEAD", key, exc) from None
            # A HEAD's 404 has no body to tell a missing key from a missing bucket, and a
            # misconfigured bucket must not read as "every object vanished" (that regenerates).
            self._check_bucket()
            return None
        return int(head["ContentLength"])

    def _check_bucket(self) -> None:
        try:
            self.client.head_bucket(Bucket=self.url.bucket)
        except Exception as exc:
            raise self._unavailable("HEAD bucket", "", exc) from None

    def _fetch(self, sha256: str, suffix: str) -> tuple[str, int] | None:
        """GETs the object into the cache, hashing as it streams; (actual SHA-256, size), or
        None when the object is missing. The copy is admitted only if it matches its name."""
        key = self._key(sha256, suffix)
        try:
            body = self.client.get_object(Bucket=self.url.bucket, Key=key)["Body"]
        except Exception as exc:
            if _error_code(exc) in _MISSING_CODES:
                return None
            raise self._unavailable("GET", key, exc) from None
        with self.cache.incoming(sha256, suffix) as (out, temp):
            try:
                actual, size = hash_copy(body, out)
                out.flush()
                os.fsync(out.fileno())
            except Exception as exc:
                raise self._unavailable("reading", key, exc) from None
            finally:
                body.close()
            if actual == sha256:
                self.cache.admit(temp, sha256, suffix)
        return actual, size

    # -- MediaStore ------------------------------------------------------------------------
    def put_file(
        self,
        path: str | os.PathLike[str],
        suffix: str = "",
        *,
        fresh: bool = False,
        registry: MediaRegistry | None = None,
    ) -> StoredMedia:
        """HEAD, then PUT: an object of the same key and size that this host holds a verified
        copy of (or that reads back right) is not uploaded again, unless `fresh` (or the
        registry says housekeeping collected it). After a PUT the object is read back; this
        returns only once the stored bytes hash to the name."""
        _check_suffix(suffix)
        sha256 = sha256_file(path)
        return put_registered(
            media_uri(sha256, suffix),
            registry,
            lambda again: self._put(path, sha256, suffix, again),
            fresh,
        )

    def _put(
        self, path: str | os.PathLike[str], sha256: str, suffix: str, fresh: bool
    ) -> StoredMedia:
        size = os.path.getsize(path)
        key, uri = self._key(sha256, suffix), media_uri(sha256, suffix)
        stored = StoredMedia(uri, sha256, size, self.cache.path(sha256, suffix))
        if not fresh and self._head_size(key) == size:
            cached = self.cache.verified(sha256, suffix)
            if cached is not None and cached.stat().st_size == size:
                return stored
            fetched = self._fetch(sha256, suffix)
            if fetched is not None and fetched[0] == sha256:
                return stored
        try:
            with open(path, "rb") as body:
                self.client.put_object(Bucket=self.url.bucket, Key=key, Body=body)
        except Exception as exc:
            raise self._unavailable("PUT", key, exc) from None
        fetched = self._fetch(sha256, suffix)
        if fetched is None:
            raise MediaProblem(f"{uri} vanished from {self.location(uri)} right after its upload")
        actual, got = fetched
        if actual != sha256:
            # The object under this content name holds other bytes (the source changed while
            # it was uploaded, or someone overwrote it): nothing may point at it. The next
            # put_file of these bytes uploads them again.
            raise MediaProblem(
                f"{uri} failed verification after upload: {self.location(uri)} holds {got} "
                f"bytes hashing to {actual[:12]}"
            )
        return stored

    def problem(self, uri: str, sha256: str | None = None) -> str | None:
        """Costs one HEAD, plus hashing this host's cache copy when there is one; without a
        good cache copy the object is downloaded into the cache and hashed (the reader that
        asked is about to need the bytes anyway). A remote object that was replaced by other
        bytes of the same size is noticed once this host's cache copy is gone."""
        expected, suffix = parse_media_uri(uri)
        if sha256 is not None and sha256 != expected:
            return f"{uri} is recorded with SHA-256 {sha256[:12]}, not its name's"
        size = self._head_size(self._key(expected, suffix))
        if size is None:
            return f"{uri} is missing from the media store ({self.location(uri)})"
        cached = self.cache.verified(expected, suffix)
        if cached is not None and cached.stat().st_size == size:
            return None
        fetched = self._fetch(expected, suffix)
        if fetched is None:
            return f"{uri} is missing from the media store ({self.location(uri)})"
        actual, _ = fetched
        if actual != expected:
            return f"{uri} is corrupt: its bytes hash to {actual[:12]} ({self.location(uri)})"
        return None

    def verified_path(self, uri: str, sha256: str | None = None) -> Path:
        """This host's cache copy of `uri`, fetched if needed; its bytes were hashed against
        the name now. A good cache copy is used without asking the server."""
        expected, suffix = parse_media_uri(uri)
        if sha256 is not None and sha256 != expected:
            raise MediaProblem(f"{uri} is recorded with SHA-256 {sha256[:12]}, not its name's")
        cached = self.cache.verified(expected, suffix)
        if cached is not None:
            return cached
        fetched = self._fetch(expected, suffix)
        if fetched is None:
            raise MediaProblem(f"{uri} is missing from the media store ({self.location(uri)})")
        actual, _ = fetched
        if actual != expected:
            raise MediaProblem(f"{uri} is corrupt: its bytes hash to {actual[:12]}")
        return self.cache.path(expected, suffix)

    def delete(self, uri: str) -> int | None:
        """Deletes the object and this host's cache copy; the bytes it held, or None when it
        was gone already. Other hosts' cache copies are not trusted without a HEAD
        (find_derived asks the server first), so they cannot bring it back."""
        sha256, suffix = parse_media_uri(uri)
        key = self._key(sha256, suffix)
        size = self._head_size(key)
        if size is not None:
            try:
                self.client.delete_object(Bucket=self.url.bucket, Key=key)
            except Exception as exc:
                raise self._unavailable("DELETE", key, exc) from None
        self.cache.discard(sha256, suffix)
        return size

    def exists(self, sha256: str) -> bool:
        _check_sha(sha256)
        prefix = self.url.key(sha256[:2], sha256)
        try:
            listed = self.client.list_objects_v2(Bucket=self.url.bucket, Prefix=prefix, MaxKeys=1)
        except Exception as exc:
            raise self._unavailable("LIST", prefix, exc) from None
        return bool(listed.get("KeyCount", 0))

    # -- derived outputs -------------------------------------------------------------------
    def _derived_key(self, kind: str, inputs_digest: str) -> str:
        if not _KIND.match(kind):
            raise ValueError(f"derived-output kind must be a short lowercase name: {kind!r}")
        _check_sha(inputs_digest)
        return self.url.key("derived", kind, inputs_digest)

    def find_derived(self, kind: str, inputs_digest: str) -> StoredMedia | None:
        key = self._derived_key(kind, inputs_digest)
        try:
            body = self.client.get_object(Bucket=self.url.bucket, Key=key)["Body"]
            try:
                text = body.read(4096).decode("utf-8", "replace").strip()
            finally:
                body.close()
        except Exception as exc:
            if _error_code(exc) in _MISSING_CODES:
                return None
            raise self._unavailable("GET", key, exc) from None
        try:
            sha256, _ = parse_media_uri(text)
            # problem() asks the server (one HEAD) before trusting this host's cache copy: an
            # output that retention collected must not come back from a stale cache copy.
            if self.problem(text) is not None:
                return None
            path = self.verified_path(text)
        except (ValueError, MediaProblem):  # a garbled memo, or its output vanished or rotted
            return None
        return StoredMedia(uri=text, sha256=sha256, size=path.stat().st_size, path=path)

    def remember_derived(self, kind: str, inputs_digest: str, stored: StoredMedia) -> None:
        parse_media_uri(stored.uri)
        key = self._derived_key(kind, inputs_digest)
        try:
            self.client.put_object(Bucket=self.url.bucket, Key=key, Body=stored.uri.encode("utf-8"))
        except Exception as exc:
            raise self._unavailable("PUT", key, exc) from None


# -- the per-process client ----------------------------------------------------------------
_clients: dict[tuple[int, str | None, str | None, str], Any] = {}
_clients_lock = threading.Lock()


def s3_client(url: S3MediaUrl) -> Any:
    """The boto3 S3 client for this endpoint, one per process (boto3 clients are thread-safe
    but not fork-safe, hence the pid in the key). Credentials come from boto3's chain when the
    client is first made."""
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]

    key = (os.getpid(), url.endpoint_url, url.region, url.addressing_style)
    with _clients_lock:
        client = _clients.get(key)
        if client is None:
            config = Config(
                s3={"addressing_style": url.addressing_style},
                retries={"max_attempts": 4, "mode": "standard"},
                # S3-compatible servers differ on flexible checksums; we verify by reading back.
                request_checksum_calculation="when_required",
                response_checksum_validation="when_required",
                connect_timeout=10,
                read_timeout=120,
            )
            client = boto3.session.Session().client(
                "s3", endpoint_url=url.endpoint_url, region_name=url.region, config=config
            )
            _clients[key] = client
    return client


def s3_media_store(
    url: S3MediaUrl, cache_dir: Path, cache_bytes: int, grace_s: float = DEFAULT_GRACE_S
) -> S3MediaStore:
    return S3MediaStore(url, s3_client(url), MediaCache(cache_dir, cache_bytes, grace_s))
