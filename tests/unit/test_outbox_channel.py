"""The outbox as a channel: YouTube's resumable protocol over a local folder.

Sessions exist before the first byte, chunks land once at the offset the session holds, the
completed upload is one atomic entry whose id comes from the session, a completion that
crashed half way completes again to the same entry, a gone session is found again by
searching the uploads for the marker, and the thumbnail is set on the entry.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from mdame_domain.channel import ChannelError
from mdame_domain.outbox import OutboxChannel, list_outbox

BODY = {
    "snippet": {"title": "Glass rain", "description": "It rains glass.\n\nmdame:abc123"},
    "status": {"privacyStatus": "public", "containsSyntheticMedia": True},
}
DATA = bytes(range(256)) * 40  # 10,240 bytes


@pytest.fixture
def channel(tmp_path: Path) -> OutboxChannel:
    return OutboxChannel(tmp_path / "outbox", "space-facts")


def _upload(channel: OutboxChannel, uri: str, chunk: int = 4096) -> dict:
    offset = 0
    while True:
        answer = channel.send_chunk(uri, DATA[offset : offset + chunk], offset, len(DATA))
        if answer.video is not None:
            return answer.video
        assert answer.next_byte > offset
        offset = answer.next_byte


def test_a_session_takes_chunks_and_publishes_one_entry(channel: OutboxChannel) -> None:
    uri = channel.initiate(BODY, False, len(DATA), "video/mp4")
    assert uri.startswith("file://")
    assert list_outbox(channel.root) == []  # a session is not a video
    first = channel.send_chunk(uri, DATA[:4096], 0, len(DATA))
    assert (first.next_byte, first.video) == (4096, None)
    assert channel.query(uri, len(DATA)).next_byte == 4096

    video = channel.send_chunk(uri, DATA[4096:], 4096, len(DATA)).video
    assert video is not None
    [entry] = list_outbox(channel.root)
    assert entry.video_id == video["id"] and entry.video_path.read_bytes() == DATA
    document = json.loads(entry.metadata_path.read_text())
    assert document["sha256"] == hashlib.sha256(DATA).hexdigest()
    assert document["description"].endswith("mdame:abc123")
    assert document["status"]["containsSyntheticMedia"] is True
    # The session now answers with the video, as YouTube's status query does.
    assert channel.query(uri, len(DATA)).video == video
    assert video["processingDetails"]["processingStatus"] == "succeeded"


def test_a_chunk_at_the_wrong_offset_is_answered_with_what_the_session_holds(
    channel: OutboxChannel,
) -> None:
    uri = channel.initiate(BODY, False, len(DATA), "video/mp4")
    channel.send_chunk(uri, DATA[:1000], 0, len(DATA))
    again = channel.send_chunk(uri, DATA[:1000], 0, len(DATA))  # a resent chunk is not kept
    assert again.next_byte == 1000
    ahead = channel.send_chunk(uri, DATA[5000:6000], 5000, len(DATA))  # a gap is refused
    assert ahead.next_byte == 1000
    assert _upload(channel, uri, chunk=3000)["id"]
    [entry] = list_outbox(channel.root)
    assert entry.video_path.read_bytes() == DATA
    with pytest.raises(ChannelError, match="badContentRange"):
        channel.send_chunk(uri, DATA, 0, len(DATA) + 1)


def test_a_completion_cut_short_completes_to_the_same_entry(channel: OutboxChannel) -> None:
    uri = channel.initiate(BODY, False, len(DATA), "video/mp4")
    folder = Path(urlsplit(uri).path)
    # Every byte is held, but the process died before the entry was published.
    (folder / "data.part").write_bytes(DATA)
    assert list_outbox(channel.root) == []
    video = channel.query(uri, len(DATA)).video
    assert video is not None
    assert channel.query(uri, len(DATA)).video == video  # and again: the same entry
    assert [e.video_id for e in list_outbox(channel.root)] == [video["id"]]


def test_a_gone_session_is_found_again_by_its_marker(channel: OutboxChannel) -> None:
    uri = channel.initiate(BODY, False, len(DATA), "video/mp4")
    video = _upload(channel, uri)
    other = channel.initiate({"snippet": {"description": "another"}}, False, 10, "video/mp4")
    channel.send_chunk(other, b"0123456789", 0, 10)
    shutil.rmtree(Path(urlsplit(uri).path))  # the channel forgot the session

    assert channel.query(uri, len(DATA)).gone
    assert channel.send_chunk(uri, DATA[:10], 0, len(DATA)).gone
    playlist = channel.uploads_playlist()
    page = channel.playlist_page(playlist, None)
    found = [
        item["contentDetails"]["videoId"]
        for item in page["items"]
        if "mdame:abc123" in item["snippet"]["description"]
    ]
    assert found == [video["id"]]
    assert [v["id"] for v in channel.videos([*found, "nosuchvideo"], "snippet")] == found
    # Another dimension's channel neither sees these uploads nor the session.
    elsewhere = OutboxChannel(channel.root, "cooking")
    assert elsewhere.playlist_page(elsewhere.uploads_playlist(), None)["items"] == []
    assert elsewhere.query(other, 10).gone


def test_the_thumbnail_lands_next_to_the_video(channel: OutboxChannel, tmp_path: Path) -> None:
    video = _upload(channel, channel.initiate(BODY, False, len(DATA), "video/mp4"))
    jpeg = tmp_path / "thumb.jpg"
    jpeg.write_bytes(b"\xff\xd8 a jpeg")
    channel.set_thumbnail(video["id"], jpeg)
    [entry] = list_outbox(channel.root)
    assert (entry.folder / "thumbnail.jpg").read_bytes() == jpeg.read_bytes()
    document = json.loads(entry.metadata_path.read_text())
    assert document["thumbnail_sha256"] == hashlib.sha256(jpeg.read_bytes()).hexdigest()
    assert document["sha256"] == hashlib.sha256(DATA).hexdigest()
    with pytest.raises(ChannelError, match="videoNotFound"):
        channel.set_thumbnail("nosuchvideo", jpeg)
