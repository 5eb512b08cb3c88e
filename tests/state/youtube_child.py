"""A publisher process for the kill tests: publishes one publication under its own pipeline
lock and SIGKILLs itself once the channel confirmed `kill_after` chunks (the progress callback
is the publisher's own hook, so the kill lands between two chunks of a real transfer), or right
before or after the n-th commit of an RPC (`crash`, through the state store's commit observer:
the crash points of the publisher's recovery points).

    python youtube_child.py '<json spec>'
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from mdame_assets.defs.publications.assets import publish_resumable
from mdame_core.state import Fence, StateStore, set_commit_observer
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
    crash = spec.get("crash")  # {"rpc": name, "when": "before"|"after", "nth": n}
    if crash:
        seen = 0

        def observer(rpc: str, when: str) -> None:
            nonlocal seen
            if rpc == crash["rpc"] and when == crash["when"]:
                seen += 1
                if seen == crash.get("nth", 1):
                    os.kill(os.getpid(), signal.SIGKILL)

        set_commit_observer(observer)

    def progress(sent: int, total: int) -> None:
        nonlocal chunks
        chunks += 1
        if chunks >= spec.get("kill_after", 1 << 30) and sent < total:
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
