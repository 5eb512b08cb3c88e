"""Set-up shared by the YouTube publishing tests: a script ready to publish, its render file,
an account whose grant is stored encrypted, and the publisher pointed at the local fake."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from test_phases import _scenes

from mdame_core.state import Account, StateStore
from mdame_domain.credentials import MasterKey, associated_data, seal_grant
from mdame_domain.video_metadata import VideoMetadata
from mdame_resources.providers.publisher import YouTubePublisher
from tests.adminkit import as_admin

DAY = "2026-11-29"
REFRESH_TOKEN = "1//rt-test-not-secret-" + "q" * 24
DECISION = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}
META = VideoMetadata(
    title="Chips get faster", description="What changed this week.", tags=("ai", "chips")
)


@dataclass
class Setup:
    account: Account
    payload: dict[str, Any]
    video: Path
    sha256: str


def ready_to_publish(a: StateStore, folder: Path, size: int = 200_000) -> Setup:
    """One script walked to publishing under `a`'s lock, with a render of `size` bytes."""
    video = folder / "render.mp4"
    video.write_bytes(os.urandom(size))
    sha = hashlib.sha256(video.read_bytes()).hexdigest()
    dim = as_admin(a).upsert_dimension("tech", "Tech")
    as_admin(a).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    base = {"dimension_id": dim, "partition_date": DAY}
    [trend] = a.record_trends("tech", [{"key": "tr", "payload": {**base, "title": "AI"}}])
    topic = a.decide_topic("to", {**base, "trend_id": trend}, DECISION)
    script = a.record_script("sc", {**base, "topic_id": topic}, DECISION)
    a.plan_scenes(script, _scenes(script, cached=True), "scene_clip", 3, f"{DAY}|tech")
    a.finish_visuals(script)
    a.transition("script", script, "visuals_ready", "voice_queued")
    a.record_voice(script, "vo", {"script_id": script, "uri": "media://v"})
    a.transition("script", script, "voiced", "render_queued")
    a.record_render(script, "re", {"script_id": script, "sha256": sha, "problems": []}, "technical")
    render = a.get_work_unit("script", script).result["render_id"]
    a.transition("script", script, "rendered", "publishing")
    [account] = a.list_accounts("tech")
    payload = {
        "script_id": script,
        "render_id": render,
        "account_id": account.id,
        "content_sha256": sha,
    }
    return Setup(account, payload, video, sha)


def store_grant(state: StateStore, account: Account, master: MasterKey) -> None:
    env = os.environ["ENV"]
    envelope = seal_grant(
        master,
        associated_data(env, account.platform, account.handle),
        {"refresh_token": REFRESH_TOKEN},
    )
    as_admin(state).store_account_credential(
        account.id, envelope.key_id, envelope.wrapped_key, envelope.ciphertext
    )


def client_secrets(path: Path, fake: Any) -> Path:
    """An installed-app OAuth client file whose endpoints are the fake's."""
    installed = {
        "client_id": "cid.test",
        "client_secret": "cs-not-secret",
        "auth_uri": f"{fake.base_url}o/oauth2/auth",
        "token_uri": fake.token_uri,
        "redirect_uris": ["http://127.0.0.1"],
    }
    path.write_text(json.dumps({"installed": installed}))
    return path


def publisher(fake: Any, folder: Path, **overrides: Any) -> YouTubePublisher:
    secrets = client_secrets(folder / "client_secret.json", fake)
    config: dict[str, Any] = {
        "client_secrets_file": str(secrets),
        "root_url": fake.base_url,
        "token_uri": fake.token_uri,
        "chunk_size": 32 * 1024,
        "timeout_s": 5.0,
        "processing_polls": 2,
        "processing_poll_s": 0.01,
        "upload_grace_s": 0,
        # A gone session's second search is due at once: most tests settle it in one run.
        "gone_recheck_s": 0.001,
    }
    config.update(overrides)
    return YouTubePublisher(**config)


def publish_once(
    a: StateStore,
    pub: YouTubePublisher,
    s: Setup,
    logs: list[Any],
    meta: VideoMetadata = META,
    **options: Any,
) -> str | None:
    """The setup's publication ('pu') through the stage's publish path, under `a`'s lock, with
    `meta` (META by default); `logs` collects (status, fields) of what it logged."""
    from mdame_assets.defs.publications.assets import publish_resumable

    return publish_resumable(
        a,
        pub,
        "pu",
        s.payload,
        s.account,
        s.video,
        meta,
        required_reviews=["technical"],
        checkpoint=lambda: None,
        log=lambda status, **f: logs.append((status, f)),
        dimension_slug="tech",
        **options,
    )


def until_published(
    a: StateStore, pub: Any, s: Setup, logs: list[Any], runs: int = 6, meta: VideoMetadata = META
) -> str:
    """Runs the publication as successive runs would (an interrupted run: the next one
    resumes), until it is published."""
    for _ in range(runs):
        try:
            video_id = publish_once(a, pub, s, logs, meta)
        except Exception as exc:
            logs.append(("run_failed", {"error": type(exc).__name__}))
            continue
        if video_id is not None:
            return video_id
    raise AssertionError(f"never published: {logs}")
