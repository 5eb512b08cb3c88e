"""Where the media store lives, as one URL (MDAME_MEDIA_URL).

    (empty)                      the local folder ($MDAME_MEDIA_ROOT, else $MDAME_HOME/media)
    file:///abs/path             a local folder
    s3://bucket[/prefix][?endpoint_url=http(s)://host[:port]&region=name
                         &addressing_style=path|virtual|auto]

The S3 form serves AWS S3 and S3-compatible stores (MinIO, Supabase Storage, Cloudflare R2, GCS
interop) through endpoint_url. Credentials never go in the URL: they come from the standard AWS
environment (AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY, a profile, an instance role), so the URL
can be logged and shown. Errors name the part that is wrong and never echo the URL, in case
someone put a secret in it anyway.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import parse_qs, urlsplit

MEDIA_URL_ENV = "MDAME_MEDIA_URL"
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_PREFIX = re.compile(r"^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+)*$")
_REGION = re.compile(r"^[a-z0-9-]{1,40}$")
_HOST = re.compile(r"^[A-Za-z0-9.-]+$|^\[[0-9A-Fa-f:.]+\]$")
_ADDRESSING = ("path", "virtual", "auto")
_QUERY_KEYS = ("endpoint_url", "region", "addressing_style")


class MediaUrlError(ValueError):
    """MDAME_MEDIA_URL (or the media resource's `url`) is not a media store URL we accept."""


@dataclass(frozen=True)
class LocalMediaUrl:
    path: str | None  # None: the default folder


@dataclass(frozen=True)
class S3MediaUrl:
    bucket: str
    prefix: str  # no leading or trailing slash; "" for the bucket's root
    endpoint_url: str | None
    region: str | None
    addressing_style: str  # path-style unless told otherwise when an endpoint is given

    def key(self, *parts: str) -> str:
        return "/".join(p for p in (self.prefix, *parts) if p)

    def display(self, *parts: str) -> str:
        return f"s3://{self.bucket}/{self.key(*parts)}"


def parse_media_url(url: str) -> LocalMediaUrl | S3MediaUrl:
    url = url.strip()
    if not url:
        return LocalMediaUrl(None)
    scheme = url.split(":", 1)[0].lower() if ":" in url else ""
    if scheme not in ("file", "s3"):
        raise MediaUrlError(
            f"{MEDIA_URL_ENV} must start with s3:// or file:// (got scheme {scheme or 'none'!r})"
        )
    parts = urlsplit(url)
    if "@" in parts.netloc:
        raise MediaUrlError(
            f"{MEDIA_URL_ENV} must not carry credentials: they come from the AWS environment "
            "(AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile or a role)"
        )
    if parts.fragment:
        raise MediaUrlError(f"{MEDIA_URL_ENV} must not have a #fragment")
    if scheme == "file":
        return _local(parts.netloc, parts.path, parts.query)
    return _s3(parts.netloc, parts.path, parts.query)


def _local(netloc: str, path: str, query: str) -> LocalMediaUrl:
    if netloc not in ("", "localhost"):
        raise MediaUrlError(
            f"{MEDIA_URL_ENV}: a file:// URL names a local folder, not host {netloc!r}"
        )
    if query:
        raise MediaUrlError(f"{MEDIA_URL_ENV}: a file:// URL takes no query")
    if not path.startswith("/") or path == "/":
        raise MediaUrlError(
            f"{MEDIA_URL_ENV}: file:// needs an absolute folder, like file:///srv/media"
        )
    return LocalMediaUrl(path)


def _s3(bucket: str, path: str, query: str) -> S3MediaUrl:
    if not _BUCKET.match(bucket) or ".." in bucket:
        raise MediaUrlError(
            f"{MEDIA_URL_ENV}: {bucket!r} is not a valid bucket name (3-63 characters: lowercase "
            "letters, digits, dots and hyphens, starting and ending with a letter or digit)"
        )
    prefix = path.strip("/")
    if prefix and (
        not _PREFIX.match(prefix) or any(seg in (".", "..") for seg in prefix.split("/"))
    ):
        raise MediaUrlError(
            f"{MEDIA_URL_ENV}: prefix {prefix!r} must be folder names of letters, digits, "
            "'.', '_' and '-' separated by single slashes"
        )
    options = _query(query)
    endpoint = options.get("endpoint_url")
    if endpoint is not None:
        _check_endpoint(endpoint)
        endpoint = endpoint.rstrip("/")
    region = options.get("region")
    if region is not None and not _REGION.match(region):
        raise MediaUrlError(f"{MEDIA_URL_ENV}: region {region!r} is not a region name")
    style = options.get("addressing_style", "path" if endpoint else "auto")
    if style not in _ADDRESSING:
        raise MediaUrlError(
            f"{MEDIA_URL_ENV}: addressing_style must be one of {', '.join(_ADDRESSING)}"
        )
    return S3MediaUrl(bucket, prefix, endpoint, region, style)


def _query(query: str) -> dict[str, str]:
    try:
        pairs = parse_qs(query, keep_blank_values=True, strict_parsing=bool(query))
    except ValueError:
        raise MediaUrlError(f"{MEDIA_URL_ENV}: the query is not key=value pairs") from None
    for key, values in pairs.items():
        if key not in _QUERY_KEYS:  # the value is not echoed: it might be a secret
            raise MediaUrlError(
                f"{MEDIA_URL_ENV}: unknown option {key!r} (known: {', '.join(_QUERY_KEYS)})"
            )
        if len(values) != 1 or not values[0]:
            raise MediaUrlError(f"{MEDIA_URL_ENV}: option {key!r} needs exactly one value")
    return {key: values[0] for key, values in pairs.items()}


def _check_endpoint(endpoint: str) -> None:
    parts = urlsplit(endpoint)
    if parts.scheme not in ("http", "https"):
        raise MediaUrlError(f"{MEDIA_URL_ENV}: endpoint_url must be an http:// or https:// URL")
    if "@" in parts.netloc:
        raise MediaUrlError(f"{MEDIA_URL_ENV}: endpoint_url must not carry credentials")
    if parts.query or parts.fragment:
        raise MediaUrlError(f"{MEDIA_URL_ENV}: endpoint_url takes no query or fragment")
    try:
        host, port = parts.hostname, parts.port
    except ValueError:
        raise MediaUrlError(f"{MEDIA_URL_ENV}: endpoint_url has a bad port") from None
    if not host or not _HOST.match(parts.netloc.rsplit(":", 1)[0] if port else parts.netloc):
        raise MediaUrlError(f"{MEDIA_URL_ENV}: endpoint_url has no valid host")
