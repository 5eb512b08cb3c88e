"""object_store: MDAME_MEDIA_URL reachable: s3 -> HEAD bucket; a local folder -> writable (and
a WARN when GPU workers on other hosts could not reach it)."""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

from mdame_cli.doctor.context import Doctor
from mdame_core import settings
from mdame_domain.doctor import Status


def check_object_store(doctor: Doctor) -> None:
    from mdame_domain.media_url import (
        MEDIA_URL_ENV,
        LocalMediaUrl,
        MediaUrlError,
        parse_media_url,
    )
    from mdame_resources.media import media_root
    from mdame_runtime.executors import executor_name

    try:
        parsed = parse_media_url(settings.get(MEDIA_URL_ENV))
    except MediaUrlError as exc:
        doctor.add("object_store", Status.FAIL, f"{MEDIA_URL_ENV}: {exc}")
        return
    if isinstance(parsed, LocalMediaUrl):
        root = Path(parsed.path) if parsed.path else media_root()
        try:
            root.mkdir(parents=True, exist_ok=True)
            with tempfile.NamedTemporaryFile(dir=root, prefix=".doctor-"):
                pass
        except OSError as exc:
            doctor.add(
                "object_store",
                Status.FAIL,
                f"local folder {root} not writable ({exc.strerror})",
            )
            return
        with contextlib.suppress(ValueError):
            if executor_name() in ("celery", "k8s"):
                doctor.add(
                    "object_store",
                    Status.WARN,
                    f"local folder {root} with MDAME_GPU_EXECUTOR={executor_name()}: workers "
                    "on other hosts cannot reach it (use an s3:// MDAME_MEDIA_URL)",
                )
                return
        doctor.add("object_store", Status.OK, f"local folder {root} writable")
        return
    _check_bucket(doctor, parsed)


def _check_bucket(doctor: Doctor, url: Any) -> None:
    import boto3  # type: ignore[import-untyped]
    from botocore.config import Config  # type: ignore[import-untyped]
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError  # type: ignore[import-untyped]

    where = f"s3://{url.bucket}" + (f" at {url.endpoint_url}" if url.endpoint_url else "")
    config = Config(
        s3={"addressing_style": url.addressing_style},
        retries={"max_attempts": 1, "mode": "standard"},
        connect_timeout=doctor.options.timeout_s,
        read_timeout=doctor.options.timeout_s,
    )
    client = boto3.session.Session().client(
        "s3", endpoint_url=url.endpoint_url, region_name=url.region, config=config
    )
    try:
        client.head_bucket(Bucket=url.bucket)
    except NoCredentialsError:
        doctor.add("object_store", Status.FAIL, f"{where}: no AWS credentials found")
        return
    except ClientError as exc:
        code = str(exc.response.get("Error", {}).get("Code", ""))
        if code in ("404", "NoSuchBucket", "NotFound"):
            doctor.add("object_store", Status.FAIL, f"bucket {url.bucket} does not exist ({where})")
        elif code in ("403", "AccessDenied", "Forbidden"):
            doctor.add("object_store", Status.FAIL, f"{where}: access denied (HTTP 403)")
        else:
            doctor.add("object_store", Status.FAIL, f"{where}: HEAD bucket failed ({code})")
        return
    except BotoCoreError as exc:
        doctor.add("object_store", Status.FAIL, f"{where} not reachable ({type(exc).__name__})")
        return
    doctor.add("object_store", Status.OK, f"{where}: bucket reachable (HEAD bucket)")
