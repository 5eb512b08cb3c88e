"""A publisher process for the kill tests: publishes one publication under its own pipeline
lock and SIGKILLs itself once the channel confirmed `kill_after` chunks (the progress callback
is the publisher's own hook, so the kill lands between two chunks of a real transfer).

    python youtube_child.py '<json spec>'
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from mdame_assets.defs.publications.assets import publish_resumable
from mdame_core.state import Fence, StateStore
from mdame_domain.video_metadata import VideoMetadata
from mdame_resources.providers.publisher import YouTubePublisher


def main() -> None:
    spec = json.loads(sys.argv[1])
    state = StateStore(spec["db"], env="dev", pool_max=2)
    token = state.acquire_pipeline_lock("pipeline:tech", "child", 600)
    assert token is not None, "the parent still holds the lock"
    fenced = state.fenced(Fence("pipeline:tech", "child", token, 600))
    [account] = [a for a in state.list_accounts("tech") if a.id == spec["account_id"]]
    chunks = 0

    def progress(sent: int, total: int) -> None:
        nonlocal chunks
        chunks += 1
        if chunks >= spec["kill_after"] and sent < total:
            os.kill(os.getpid(), signal.SIGKILL)

    publish_resumable(
        fenced,
        YouTubePublisher(**spec["publisher"]),
        "pu",
        spec["payload"],
        account,
        Path(spec["video"]),
        VideoMetadata(**spec["meta"]),
        required_reviews=["technical"],
        checkpoint=lambda: None,
        log=lambda status, **fields: None,
        dimension_slug="tech",
        progress=progress,
    )
    print("finished without being killed", flush=True)


if __name__ == "__main__":
    main()
