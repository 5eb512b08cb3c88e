"""What interrupted or refused publications leave behind, on the production path: YouTube's
real client against the local fake, the real database.

- the answer to the last chunk is lost and the script is left past the stall age: the recovery
  pass leaves the upload to the publications stage, which takes it over and records the video
  that is already on the channel (once);
- a publication whose account has no stored grant, or whose grant cannot be opened with the
  master key, is refused before any session: pending again, its attempt failed, its insert
  quota released, and the operator told how to fix it;
- a published video that was removed from the channel is recorded 'removed' (an alert), and
  the publication stands instead of raising on every run;
- an account deactivated with an upload in flight: the upload is settled (the video found on
  the channel, or the partial session abandoned), and what did not publish ends 'failed' with
  its quota released.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import pytest
from test_fencing import hold
from youtube_kit import Setup, publish_once, publisher, ready_to_publish, store_grant

from fakes.youtube import FakeYouTube
from mdame_assets.defs.publications.assets import retire_publication
from mdame_core.state import StateStore
from mdame_domain.credentials import MasterKey
from mdame_pipeline.recovery import recover
from mdame_resources.providers.publisher import YouTubePublisher
from tests.adminkit import as_admin


def _publish(a: StateStore, pub: YouTubePublisher, s: Setup, logs: list[Any], **kw: Any):
    return publish_once(a, pub, s, logs, **kw)


def _counted(fake: FakeYouTube) -> int:
    """The initiations the channel's only channel counted."""
    [channel] = list(fake.snapshot()["channels"])
    return fake.counters(channel)["insert"]


def _alerts(owner: Any, cause: str) -> list[str]:
    got = owner.execute("SELECT text FROM mdame.alerts WHERE cause = %s ORDER BY id", [cause])
    return [text for (text,) in got.fetchall()]


def test_a_lost_last_answer_past_the_stall_age_is_recorded_once(
    state, owner, tmp_path, fake: FakeYouTube, master
) -> None:
    a = hold(state, "tech")
    s = ready_to_publish(a, tmp_path)
    store_grant(a, s.account, master)
    pub = publisher(fake, tmp_path)
    fake.faults.push("lost_response")  # the video completes; its answer never comes
    with pytest.raises(Exception):  # noqa: B017 - the answer never came
        _publish(a, pub, s, [])
    assert [v["id"] for v in fake.videos()] != []
    assert state.get_work_unit("publication", "pu").state == "uploading"
    owner.execute("UPDATE mdame.scripts SET updated_at = now() - interval '2 hours'")

    # The recovery pass at the start of the next run: it must not fail, nor fail the script.
    report = recover(a, s.account.dimension_id)
    script_id = s.payload["script_id"]
    assert report.to_reconcile == [script_id] and report.failed == []
    assert state.get_work_unit("script", script_id).state == "publishing"

    logs: list[Any] = []
    video_id = _publish(a, pub, s, logs)
    assert [v["id"] for v in fake.videos()] == [video_id]
    assert len(fake.sessions()) == 1  # asked the session, never a new one
    publication = state.get_work_unit("publication", "pu")
    assert publication.state == "published" and publication.result["video_id"] == video_id
    assert state.bucket_usage(s.account.id)["insert"] == (0, 1)


@pytest.mark.parametrize("cause", ["no grant", "wrong master key"])
def test_an_account_refused_before_the_session_leaves_no_half_state(
    state, owner, tmp_path, fake: FakeYouTube, master, monkeypatch, cause
) -> None:
    a = hold(state, "tech")
    s = ready_to_publish(a, tmp_path)
    if cause == "wrong master key":
        store_grant(a, s.account, master)
        monkeypatch.setenv("MDAME_MASTER_KEY", MasterKey.generate().encoded())
    logs: list[Any] = []

    assert _publish(a, publisher(fake, tmp_path), s, logs) is None

    publication = state.get_work_unit("publication", "pu")
    assert publication.state == "pending"
    assert [x.status for x in state.list_attempts("pu")] == ["failed"]
    assert state.bucket_usage(s.account.id).get("insert", (0, 0)) == (0, 0)
    assert fake.sessions() == {} and fake.videos() == []
    [alert] = _alerts(owner, "reauth_needed")
    assert "mdame accounts connect tech --account @tech" in alert
    assert master.encoded() not in alert + repr(logs)
    # Once the grant is there again, the next run publishes.
    monkeypatch.setenv("MDAME_MASTER_KEY", master.encoded())
    store_grant(a, s.account, master)
    assert _publish(a, publisher(fake, tmp_path), s, []) is not None
    assert state.bucket_usage(s.account.id)["insert"] == (0, 1)


def test_a_removed_video_is_recorded_and_does_not_block_the_partition(
    state, owner, tmp_path, fake: FakeYouTube, master
) -> None:
    a = hold(state, "tech")
    s = ready_to_publish(a, tmp_path)
    store_grant(a, s.account, master)
    pub = publisher(fake, tmp_path)
    video_id = _publish(a, pub, s, [])
    assert video_id is not None
    # A run crashed before it recorded the video's processing; meanwhile the video was
    # removed from the channel.
    owner.execute("UPDATE mdame.publications SET result = result - 'processing'")
    fake.remove_video(video_id)

    assert _publish(a, pub, s, []) == video_id

    publication = state.get_work_unit("publication", "pu")
    assert (publication.state, publication.result["processing"]) == ("published", "removed")
    events = state.list_events("publication", publication.id)
    assert any(e.event == "alert" and e.detail["processing"] == "removed" for e in events)


@pytest.mark.parametrize("interrupted", ["reset_mid_chunk", "lost_response"])
def test_a_deactivated_account_s_upload_in_flight_is_settled(
    state, tmp_path, fake: FakeYouTube, master, interrupted
) -> None:
    a = hold(state, "tech")
    s = ready_to_publish(a, tmp_path, size=200_000)  # several 32 KiB chunks
    store_grant(a, s.account, master)
    pub = publisher(fake, tmp_path)
    fake.faults.push(interrupted)
    with pytest.raises(Exception):  # noqa: B017 - the upload was cut short
        _publish(a, pub, s, [])
    assert state.get_work_unit("publication", "pu").state == "uploading"
    as_admin(a).set_dimension_accounts_active("tech", [])  # removed from the dimension's YAML
    [account] = state.list_accounts("tech")
    assert not account.active
    logs: list[Any] = []
    publish = partial(_publish, a, pub, s, logs)

    video_id, settled = retire_publication(a, "pu", account, publish, lambda *_, **__: None)

    assert settled
    publication = state.get_work_unit("publication", "pu")
    insert = state.bucket_usage(s.account.id)["insert"]
    # The channel counted the session's initiation either way; nothing stays reserved.
    assert insert == (0, _counted(fake)) == (0, 1)
    if interrupted == "lost_response":  # the video was already out: recorded, once
        assert video_id is not None and [v["id"] for v in fake.videos()] == [video_id]
        assert publication.state == "published"
    else:  # part of the file was sent: abandoned, nothing out, nothing held
        assert video_id is None and fake.videos() == []
        assert publication.state == "failed"
        assert [x.status for x in state.list_attempts("pu")] == ["failed"]
    assert len(fake.sessions()) == 1  # never a new session for a deactivated account
    # Settled for good: again changes nothing and asks nothing.
    requests = len(fake.requests())
    assert retire_publication(a, "pu", account, publish, lambda *_, **__: None) == (
        video_id,
        True,
    )
    assert len(fake.requests()) == requests


@pytest.mark.parametrize(
    ("fault", "cause", "fix"),
    [
        ("forbidden", "reauth_needed", "mdame accounts connect tech --account @tech"),
        ("invalid_title", "provider_refused", "dimensions/tech.yaml"),
    ],
)
def test_a_permanent_refusal_is_said_once_with_the_channel_s_words_and_not_retried(
    state, owner, tmp_path, fake: FakeYouTube, master, fault, cause, fix
) -> None:
    a = hold(state, "tech")
    s = ready_to_publish(a, tmp_path)
    store_grant(a, s.account, master)
    pub = publisher(fake, tmp_path)
    fake.faults.push(fault)
    logs: list[Any] = []

    assert _publish(a, pub, s, logs) is None  # the account's other publications carry on

    publication = state.get_work_unit("publication", "pu")
    assert publication.state == "pending"
    assert [x.status for x in state.list_attempts("pu")] == ["failed"]
    # The refused call was counted by the channel: its insert quota stays spent.
    assert state.bucket_usage(s.account.id).get("insert", (0, 0)) == (0, _counted(fake)) == (0, 1)
    [alert] = _alerts(owner, cause)
    assert fix in alert
    assert ("forbidden" if fault == "forbidden" else "invalid video title") in alert
    if fault == "forbidden":  # no upload to that channel until it is connected again
        assert state.account_status(s.account.id).needs_reauth
        requests = len(fake.requests())
        assert _publish(a, pub, s, logs) is None
        assert len(fake.requests()) == requests
    else:  # the metadata is fixed in the YAML; the next run sends again and publishes
        assert _publish(a, pub, s, logs) is not None
