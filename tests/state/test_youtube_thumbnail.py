"""Issue 11: the render's thumbnail set on the channel with thumbnails.set (50 units) once per
publication, a channel that refuses custom thumbnails recorded (the publication stands), and
the publisher refusing bytes other than the approved ones, against the local fake with the
real google-api-python-client and real PostgreSQL."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path
from typing import Any

import pytest
from test_fencing import hold
from youtube_kit import Setup, publish_once, publisher, ready_to_publish, store_grant

from fakes.youtube import THUMBNAIL_COST
from mdame_core.state import StateStore
from mdame_domain.credentials import MasterKey
from mdame_domain.outbox import ContentMismatch
from mdame_resources.providers.publisher import YouTubePublisher


@pytest.fixture
def jpeg(tmp_path: Path) -> Path:
    path = tmp_path / "thumbnail.jpg"
    subprocess.run(
        ["ffmpeg", "-nostdin", "-v", "error", "-y", "-f", "lavfi", "-i", "color=c=red:s=320x180",
         "-frames:v", "1", str(path)],
        check=True,
    )  # fmt: skip
    return path


def _publish(
    a: StateStore, pub: YouTubePublisher, s: Setup, logs: list[Any], thumbnail: Path | None
) -> str | None:
    return publish_once(a, pub, s, logs, thumbnail=thumbnail)


def _granted(state: StateStore, tmp_path: Path, master: MasterKey) -> tuple[StateStore, Setup]:
    a = hold(state, "tech")
    s = ready_to_publish(a, tmp_path)
    store_grant(a, s.account, master)
    return a, s


def _channel(fake) -> str:
    [channel] = list(fake.snapshot()["channels"])
    return channel


def test_the_thumbnail_is_set_once_and_charged_once(state, tmp_path, fake, master, jpeg) -> None:
    a, s = _granted(state, tmp_path, master)
    logs: list[Any] = []
    pub = publisher(fake, tmp_path)

    video_id = _publish(a, pub, s, logs, jpeg)

    assert video_id is not None
    set_once = fake.thumbnail(video_id)
    assert set_once == {
        "sha256": hashlib.sha256(jpeg.read_bytes()).hexdigest(),
        "size": jpeg.stat().st_size,
        "sets": 1,
    }
    assert state.get_work_unit("publication", "pu").result["thumbnail"]["status"] == "set"
    assert any(r.startswith("POST /upload/youtube/v3/thumbnails/set?") for r in fake.requests())
    counters = fake.counters(_channel(fake))
    assert state.bucket_usage(s.account.id)["units"] == (0, counters["units"])
    assert counters["units"] >= THUMBNAIL_COST
    # A retried run finds it recorded: no second thumbnails.set, nothing charged again.
    assert _publish(a, pub, s, logs, jpeg) == video_id
    assert fake.thumbnail(video_id) == set_once
    assert fake.counters(_channel(fake)) == counters


def test_a_run_that_ended_before_the_thumbnail_sets_it_on_the_retry(
    state, tmp_path, fake, master, jpeg
) -> None:
    a, s = _granted(state, tmp_path, master)
    pub = publisher(fake, tmp_path)
    video_id = _publish(a, pub, s, [], None)  # published, no thumbnail recorded
    assert video_id is not None and fake.thumbnail(video_id) is None

    assert _publish(a, pub, s, [], jpeg) == video_id

    assert fake.thumbnail(video_id)["sets"] == 1  # type: ignore[index]
    assert [v["id"] for v in fake.videos()] == [video_id]  # the video is not uploaded again
    counters = fake.counters(_channel(fake))
    assert state.bucket_usage(s.account.id)["units"] == (0, counters["units"])


def test_a_channel_refusing_custom_thumbnails_is_recorded_not_failed(
    state, tmp_path, fake, master, jpeg
) -> None:
    a, s = _granted(state, tmp_path, master)
    fake.allow_custom_thumbnails(_channel(fake), False)
    logs: list[Any] = []

    video_id = _publish(a, publisher(fake, tmp_path), s, logs, jpeg)

    assert video_id is not None and fake.thumbnail(video_id) is None
    publication = state.get_work_unit("publication", "pu")
    assert publication.state == "published"
    assert publication.result["thumbnail"] == {"status": "refused", "reason": "forbidden"}
    assert ("thumbnail_refused", {"video_id": video_id, "reason": "forbidden"}) in logs


def test_a_5xx_on_thumbnails_set_is_tried_again(state, tmp_path, fake, master, jpeg) -> None:
    a, s = _granted(state, tmp_path, master)
    logs: list[Any] = []
    pub = publisher(fake, tmp_path, thumbnail_attempts=3, thumbnail_retry_s=0.01)
    fake.faults.push("thumbnail_5xx")
    fake.faults.push("thumbnail_5xx")

    video_id = _publish(a, pub, s, logs, jpeg)

    # Two 503s, then set on the third try: once on the channel.
    assert video_id is not None and fake.thumbnail(video_id)["sets"] == 1  # type: ignore[index]
    assert [f["attempt"] for st, f in logs if st == "thumbnail_retry"] == [1, 2]
    assert state.get_work_unit("publication", "pu").result["thumbnail"]["status"] == "set"
    # The ledger counts every attempt (a failed call may have been charged): never less than
    # the channel, over by the two answered 503s.
    counters = fake.counters(_channel(fake))
    assert state.bucket_usage(s.account.id)["units"] == (0, counters["units"] + 2 * THUMBNAIL_COST)


def test_a_thumbnail_meeting_only_5xx_is_recorded_failed_and_the_video_stands(
    state, tmp_path, fake, master, jpeg
) -> None:
    a, s = _granted(state, tmp_path, master)
    logs: list[Any] = []
    for _ in range(3):
        fake.faults.push("thumbnail_5xx")

    pub = publisher(fake, tmp_path, thumbnail_attempts=3, thumbnail_retry_s=0.01)
    video_id = _publish(a, pub, s, logs, jpeg)

    assert video_id is not None and fake.thumbnail(video_id) is None
    publication = state.get_work_unit("publication", "pu")
    assert publication.state == "published"
    assert publication.result["thumbnail"] == {"status": "failed", "reason": "backendError"}
    assert [st for st, _ in logs if st.startswith("thumbnail_")] == [
        "thumbnail_retry", "thumbnail_retry", "thumbnail_failed",
    ]  # fmt: skip


def test_bytes_other_than_the_approved_ones_are_refused(state, tmp_path, fake, master) -> None:
    a, s = _granted(state, tmp_path, master)
    s.video.write_bytes(s.video.read_bytes()[:-1] + b"\0")  # one byte differs

    with pytest.raises(ContentMismatch, match="not the approved"):
        _publish(a, publisher(fake, tmp_path), s, [], None)

    assert fake.videos() == [] and fake.sessions() == {}
    publication = state.get_work_unit("publication", "pu")
    assert publication.state == "pending"  # nothing out: the next run may upload the right bytes
    assert state.bucket_usage(s.account.id).get("insert", (0, 0)) == (0, 0)
