"""A local S3-protocol server for tests: moto's server mode on 127.0.0.1, spoken to by real boto3.

The session fixture `moto_s3` (tests/conftest.py) starts one server per test session; the
function fixture `s3_bucket` makes a fresh bucket on it. Another process (a Celery worker, a
subprocess) reaches the same server through environment variables only:

    env = {**os.environ, **s3_bucket.env()}   # MDAME_MEDIA_URL and dummy AWS credentials
    subprocess.Popen([...], env=env)

Inside the test process, `monkeypatch` the same variables (s3_bucket.apply(monkeypatch)).
The credentials are dummies: moto accepts any, and nothing ever leaves 127.0.0.1.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import pytest

REGION = "us-east-1"
# Dummy credentials, and no shared AWS config files: a developer's ~/.aws must not leak in.
DUMMY_AWS_ENV = {
    "AWS_ACCESS_KEY_ID": "test-key-not-secret",
    "AWS_SECRET_ACCESS_KEY": "test-secret-not-secret",
    "AWS_DEFAULT_REGION": REGION,
    "AWS_CONFIG_FILE": os.devnull,
    "AWS_SHARED_CREDENTIALS_FILE": os.devnull,
    "AWS_EC2_METADATA_DISABLED": "true",
}
_UNSET = ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3")


def raw_client(endpoint: str) -> Any:
    """A boto3 client of the test's own (for inspecting or spoiling the bucket behind the
    store's back); it never shares the store's cached client or its event hooks."""
    import boto3
    from botocore.config import Config

    return boto3.session.Session().client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=DUMMY_AWS_ENV["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=DUMMY_AWS_ENV["AWS_SECRET_ACCESS_KEY"],
        config=Config(s3={"addressing_style": "path"}),
    )


@dataclass
class S3Bucket:
    """A fresh bucket on the local server, and how to point the media store at it."""

    name: str
    endpoint: str
    client: Any
    prefix: str = "media"

    @property
    def url(self) -> str:
        return f"s3://{self.name}/{self.prefix}?endpoint_url={self.endpoint}&region={REGION}"

    def env(self) -> dict[str, str]:
        """Everything another process needs to use this bucket as its media store."""
        return {"MDAME_MEDIA_URL": self.url, **DUMMY_AWS_ENV}

    def apply(self, monkeypatch: pytest.MonkeyPatch) -> None:
        for name, value in self.env().items():
            monkeypatch.setenv(name, value)
        for name in _UNSET:
            monkeypatch.delenv(name, raising=False)

    def keys(self, under: str = "") -> list[str]:
        pages = self.client.get_paginator("list_objects_v2").paginate(
            Bucket=self.name, Prefix=under
        )
        return sorted(o["Key"] for page in pages for o in page.get("Contents", []))

    def body(self, key: str) -> bytes:
        return self.client.get_object(Bucket=self.name, Key=key)["Body"].read()

    def overwrite(self, key: str, data: bytes) -> None:
        self.client.put_object(Bucket=self.name, Key=key, Body=data)

    def delete(self, key: str) -> None:
        self.client.delete_object(Bucket=self.name, Key=key)


@dataclass
class MotoS3:
    endpoint: str  # http://127.0.0.1:<port>
    client: Any

    def new_bucket(self) -> S3Bucket:
        name = f"mdame-test-{uuid.uuid4().hex[:12]}"
        self.client.create_bucket(Bucket=name)
        return S3Bucket(name, self.endpoint, self.client)


@contextmanager
def moto_server() -> Iterator[MotoS3]:
    """moto's S3 server in a thread of this process, on a free port of 127.0.0.1."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        endpoint = f"http://{host}:{port}"
        yield MotoS3(endpoint, raw_client(endpoint))
    finally:
        server.stop()
