"""MDAME_MEDIA_URL: the accepted forms, and errors that name what is wrong without echoing."""

from __future__ import annotations

import pytest

from mdame_domain.media_url import LocalMediaUrl, MediaUrlError, S3MediaUrl, parse_media_url


def test_empty_means_the_default_local_folder():
    assert parse_media_url("") == LocalMediaUrl(None)
    assert parse_media_url("  ") == LocalMediaUrl(None)
    assert parse_media_url("file:///srv/media") == LocalMediaUrl("/srv/media")


def test_s3_url_with_endpoint_region_and_prefix():
    url = parse_media_url(
        "s3://mdame-media/prod/clips/?endpoint_url=http://127.0.0.1:9000/&region=us-east-1"
    )
    assert url == S3MediaUrl(
        "mdame-media", "prod/clips", "http://127.0.0.1:9000", "us-east-1", "path"
    )
    assert isinstance(url, S3MediaUrl)
    assert url.key("ab", "x.mp4") == "prod/clips/ab/x.mp4"
    assert url.display("ab", "x.mp4") == "s3://mdame-media/prod/clips/ab/x.mp4"


def test_s3_url_defaults():
    url = parse_media_url("s3://my.bucket-1")
    assert url == S3MediaUrl("my.bucket-1", "", None, None, "auto")
    assert isinstance(url, S3MediaUrl) and url.key("ab", "x") == "ab/x"
    virtual = parse_media_url("s3://b12/p?endpoint_url=https://x.r2.dev&addressing_style=virtual")
    assert isinstance(virtual, S3MediaUrl) and virtual.addressing_style == "virtual"


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("http://bucket/x", "must start with s3:// or file://"),
        ("bucket/prefix", "must start with s3:// or file://"),
        ("s3://Bad_Bucket/x", "'Bad_Bucket' is not a valid bucket name"),
        ("s3://ab", "'ab' is not a valid bucket name"),
        ("s3://", "'' is not a valid bucket name"),
        ("s3://bucket/a//b", "prefix 'a//b'"),
        ("s3://bucket/a/../b", "prefix 'a/../b'"),
        ("s3://bucket/p?endpoint=http://x", "unknown option 'endpoint'"),
        ("s3://bucket/p?endpoint_url=ftp://x", "endpoint_url must be an http:// or https://"),
        ("s3://bucket/p?endpoint_url=http://", "endpoint_url has no valid host"),
        ("s3://bucket/p?endpoint_url=http://h:99999", "endpoint_url has a bad port"),
        ("s3://bucket/p?region=US_EAST", "region 'US_EAST' is not a region name"),
        ("s3://bucket/p?region=a&region=b", "option 'region' needs exactly one value"),
        ("s3://bucket/p?region=", "option 'region' needs exactly one value"),
        ("s3://bucket/p?addressing_style=dns", "addressing_style must be one of"),
        ("s3://bucket/p#frag", "must not have a #fragment"),
        ("file://host/srv/media", "not host 'host'"),
        ("file:///", "needs an absolute folder"),
        ("file:///srv?x=1", "takes no query"),
    ],
)
def test_bad_urls_name_what_is_wrong(url, message):
    with pytest.raises(MediaUrlError, match="MDAME_MEDIA_URL") as caught:
        parse_media_url(url)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    "url",
    [
        "s3://AKIAEXAMPLE:s3cr3t-value@bucket/prefix",
        "s3://bucket/p?endpoint_url=http://AKIAEXAMPLE:s3cr3t-value@127.0.0.1:9000",
        "s3://bucket/p?aws_secret_access_key=s3cr3t-value",
    ],
)
def test_credentials_in_the_url_are_refused_and_never_echoed(url):
    with pytest.raises(MediaUrlError) as caught:
        parse_media_url(url)
    assert "s3cr3t-value" not in str(caught.value) and "AKIAEXAMPLE" not in str(caught.value)
