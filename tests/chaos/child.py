"""One run of one partition, as a cron tick would start it: the crash harness's child process.

It runs the partition's three jobs in this process (mdame_cli.runs.run_partition) against
the database, home and media root the environment names (MDAME_DATABASE_URL,
MDAME_APP_DATABASE_URL, MDAME_HOME, MDAME_MEDIA_ROOT), with an ephemeral Dagster instance:
Dagster's run storage is not state, PostgreSQL is. MDAME_CRASH_AT / MDAME_RPC_TRACE install the
crash hook (crashpoint.py), a commit observer that SIGKILLs this process at a commit boundary.

With MDAME_CHAOS_PUBLISHER=youtube (the harness's publisher mode), the publishing stage runs
the YouTubePublisher against the fake channel the MDAME_YOUTUBE_* variables name, in chunks of
MDAME_CHAOS_CHUNK_BYTES; with MDAME_CHAOS_PUBLISHER=tiktok, the TikTokPublisher against the
TikTok server the MDAME_TIKTOK_* variables name. Every chunk PUT is a crash point too
(`send_chunk`, see install_transfer_points).

The harness forks these from a warm fork server (multiprocessing's forkserver, preloaded with
this module), so a case does not pay for importing Dagster and the definitions twice.
`python -m tests.chaos.child <partition_key>` runs one by hand.
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import dagster as dg

import mdame_domain.probe
import mdame_domain.visuals
from mdame_cli.runs import run_partition
from mdame_domain.media_store import LocalMediaStore, sha256_file
from mdame_domain.probe import MediaAnalysis, PictureStats
from mdame_resources.media import media_root
from mdame_resources.providers.publisher import (
    InstagramPublisher,
    OutboxPublisher,
    TikTokPublisher,
    YouTubePublisher,
)
from mdame_resources.providers.visuals import ProceduralVisuals
from mdame_resources.state import close_clients
from mdame_runtime.partition_keys import DIMENSION_PARTITION, PartitionRef
from tests.chaos.crashpoint import CrashObserver, install_from_env

# Set by the harness: memoize deterministic media work across cases (see install_memos).
MEMO_ENV = "MDAME_CHAOS_MEMO"
# Set by the harness's publisher mode: "youtube" or "tiktok" (see use_publisher), and the
# YouTube upload's chunk size.
PUBLISHER_ENV = "MDAME_CHAOS_PUBLISHER"
CHUNK_ENV = "MDAME_CHAOS_CHUNK_BYTES"
# The crash points of the byte transfer, named like an RPC: the n-th chunk PUT of the process.
SEND_CHUNK = "send_chunk"


def run_child(key: str) -> int:
    """Runs the partition once; prints the outcome as JSON; 0 when every job succeeded."""
    observer = install_from_env()
    if os.environ.get(MEMO_ENV) == "1":
        install_memos()
    platform = os.environ.get(PUBLISHER_ENV) or "outbox"
    use_publisher(platform)
    if observer is not None and platform != "outbox":
        install_transfer_points(observer, platform)
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(DIMENSION_PARTITION, [PartitionRef.parse(key).dimension])
    outcome = run_partition(instance, key)
    close_clients()
    print(json.dumps(asdict(outcome)), flush=True)
    return 0 if outcome.ok else 1


def forked_main(key: str, env: Mapping[str, str | None], log_path: str) -> None:
    """Entry point in a process forked by the harness: its environment, its log, one run."""
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    tempfile.tempdir = None  # the fork server's cached choice; TMPDIR is this run's own
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    code = 2
    try:
        code = run_child(key)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # no atexit work inherited from the fork server


# ------------------------------------------------------------------------------------------
# The publisher mode
# ------------------------------------------------------------------------------------------
def use_publisher(platform: str) -> None:
    """The publishing job with the platform's production publisher, or the offline outbox's
    (the other providers stay offline): the orchestrator's definitions again, with that
    publisher, for this process's run_partition. Short polls, and no grace: a killed holder's
    chunk is never in flight."""
    import mdame_cli.runs
    from mdame_assets import orchestrator

    resources: dict[str, Any]
    if platform == "outbox":  # the offline publishers, every platform's to the outbox
        outbox = OutboxPublisher(upload_grace_s=0)
        resources = {
            "youtube_publisher": outbox,
            "tiktok_publisher": outbox,
            "instagram_publisher": outbox,
        }
    elif platform == "youtube":
        resources = {
            "youtube_publisher": YouTubePublisher(
                client_secrets_file=os.environ["MDAME_YOUTUBE_CLIENT_SECRETS"],
                chunk_size=int(os.environ[CHUNK_ENV]),
                timeout_s=10.0,
                processing_polls=3,
                processing_poll_s=0.05,
                upload_grace_s=0,
            )
        }
    elif platform == "tiktok":  # its app key, secret and server from the MDAME_TIKTOK_* variables
        resources = {
            "tiktok_publisher": TikTokPublisher(
                timeout_s=10.0, processing_polls=20, processing_poll_s=0.05, upload_grace_s=0
            )
        }
    elif platform == "instagram":  # its server from MDAME_INSTAGRAM_GRAPH_URL
        resources = {
            "instagram_publisher": InstagramPublisher(
                timeout_s=10.0,
                chunk_size=int(os.environ[CHUNK_ENV]),
                processing_polls=20,
                processing_poll_s=0.05,
                upload_grace_s=0,
            )
        }
    else:
        raise ValueError(
            f"{PUBLISHER_ENV} must be outbox, youtube, tiktok or instagram, not {platform!r}"
        )
    old = orchestrator.defs()
    defs = dg.Definitions(
        assets=old.assets,
        asset_checks=old.asset_checks,
        jobs=old.jobs,
        schedules=old.schedules,
        sensors=old.sensors,
        resources={**(old.resources or {}), **resources},
    )
    mdame_cli.runs.JOBS = tuple(
        ((lambda: defs) if load is orchestrator.defs else load, name)
        for load, name in mdame_cli.runs.JOBS
    )


def install_transfer_points(observer: CrashObserver, platform: str) -> None:
    """Each chunk PUT of an upload reports to the crash observer as `send_chunk`: "after" once
    the channel confirmed it (after the last one: the video exists, its id not yet recorded),
    "before" just before it is sent; a crash at a "before" point first sends half the chunk,
    so the kill lands mid-chunk with part of its bytes on the channel."""
    from mdame_resources.providers.instagram_api import InstagramApi
    from mdame_resources.providers.tiktok_api import TikTokApi
    from mdame_resources.providers.youtube_api import YouTubeApi

    api, method = {
        "youtube": (YouTubeApi, "send_chunk"),
        "tiktok": (TikTokApi, "put_chunk"),
        "instagram": (InstagramApi, "upload"),
    }[platform]
    original = getattr(api, method)

    def send_chunk(self: Any, url: str, data: bytes, start: int, size: int, *rest: Any) -> Any:
        crash = observer.crash
        if (
            crash is not None
            and (crash.rpc, crash.phase) == (SEND_CHUNK, "before")
            and observer.count(SEND_CHUNK) == crash.n - 1
        ):
            _send_half(self, url, data, start, size)
        observer(SEND_CHUNK, "before")
        answer = original(self, url, data, start, size, *rest)
        observer(SEND_CHUNK, "after")
        return answer

    setattr(api, method, send_chunk)


def _send_half(api: Any, session_uri: str, data: bytes, start: int, size: int) -> None:
    """The chunk's request with its full length announced and half its body sent: the channel
    keeps what arrived before the connection died (the caller kills this process next)."""
    from mdame_resources.providers.instagram_api import InstagramApi
    from mdame_resources.providers.youtube_api import YouTubeApi

    url = urlsplit(session_uri)
    conn = http.client.HTTPConnection(url.netloc, timeout=10)
    method, path = "PUT", f"{url.path}?{url.query}"
    content_range = {"Content-Range": f"bytes {start}-{start + len(data) - 1}/{size}"}
    if isinstance(api, YouTubeApi):
        headers = {**api._bearer(), **content_range}
    elif isinstance(api, InstagramApi):  # the upload server takes offsets, not ranges
        method, path = "POST", url.path
        headers = {
            "Authorization": f"OAuth {api._token}",
            "offset": str(start),
            "file_size": str(size),
        }
    else:  # TikTok's upload_url carries its own token
        headers = {"Content-Type": "video/mp4", **content_range}
    conn.putrequest(method, path)
    for name, value in {**headers, "Content-Length": str(len(data))}.items():
        conn.putheader(name, value)
    conn.endheaders()
    conn.send(data[: len(data) // 2])
    time.sleep(0.2)  # let the channel read the half before the kill resets the connection


# ------------------------------------------------------------------------------------------
# Memos: the harness runs the same partition hundreds of times. Two pieces of media work are
# pure functions of their inputs and dominate a run on CPUs: generating procedural clips and
# analysing a render (probe.analyze_media: the renders asset's review and the renders checks
# each read a file with it). They are remembered across cases in the shared media root, keyed
# on their inputs (a file by its SHA-256) and on their module's source, like the render step's
# own derived-output memo. No RPC is involved, so the sequence of commits is unchanged.
# ------------------------------------------------------------------------------------------
def _source_digest(module: Any) -> str:
    return hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def install_memos() -> None:
    if getattr(ProceduralVisuals, "_chaos_memo", False):
        return
    _memoize_clips()
    _memoize_analyze_media()


def _memoize_clips() -> None:
    original = ProceduralVisuals.generate
    source = _source_digest(mdame_domain.visuals)

    def generate(
        self: ProceduralVisuals,
        scene_hash: str,
        prompt: str,
        palette: Sequence[str],
        duration_s: float,
        out: Path,
        engine: str | None = None,
    ) -> Path:
        store = LocalMediaStore(media_root())
        key = _digest("clip", source, scene_hash, list(palette), duration_s)
        stored = store.find_derived("chaos-clip", key)
        if stored is not None:
            shutil.copyfile(stored.path, out)
            return Path(out)
        made = original(self, scene_hash, prompt, palette, duration_s, out)
        store.remember_derived("chaos-clip", key, store.put_file(made, Path(made).suffix))
        return made

    ProceduralVisuals.generate = generate  # type: ignore[method-assign]
    ProceduralVisuals._chaos_memo = True  # type: ignore[attr-defined]


def _memoize_analyze_media() -> None:
    # The modules that imported analyze_media by name hold their own reference: they must be
    # loaded before it is replaced (run_partition's definitions load them; this makes sure).
    import mdame_assets.defs.renders.assets
    import mdame_assets.defs.renders.checks

    original = mdame_domain.probe.analyze_media
    source = _source_digest(mdame_domain.probe)

    def analyze_media(path: str, picture: PictureStats | None = None) -> MediaAnalysis:
        root = media_root() / "derived" / "chaos-analysis"
        given = None if picture is None else asdict(picture)
        marker = root / _digest("analysis", source, sha256_file(path), given)
        if not marker.exists():
            root.mkdir(parents=True, exist_ok=True)
            temp = marker.with_name(f".{marker.name}.{os.getpid()}")
            temp.write_text(json.dumps(original(path, picture).to_json()), encoding="utf-8")
            os.replace(temp, marker)
        # Always the stored (rounded) form, so the first case judges what later ones read.
        return MediaAnalysis.from_json(json.loads(marker.read_text(encoding="utf-8")))

    _replace_everywhere(original, analyze_media)
    for module in (mdame_assets.defs.renders.assets, mdame_assets.defs.renders.checks):
        assert module.analyze_media is analyze_media, module.__name__


def _replace_everywhere(original: Callable[..., Any], replacement: Callable[..., Any]) -> None:
    """Every loaded mdame module that imported `original` by name gets `replacement`."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("mdame_") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if value is original:
                setattr(module, attr, replacement)


if __name__ == "__main__":
    sys.exit(run_child(sys.argv[1]))
