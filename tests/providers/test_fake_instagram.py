"""The local Instagram server (fakes.instagram) speaks Meta's documented protocol: containers,
resumable uploads on the rupload path, container status, media_publish, the publishing limit,
the media list with cursor paging, insights, token refresh, rate limiting and every fault.
httpx talks to it on 127.0.0.1, as the production client will."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes.instagram import FakeInstagram, running

TOKEN = "IGAA-test-token"
VIDEO = bytes(range(256)) * 40  # 10 KiB: small bodies keep the file fast


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeInstagram]:
    with running(tmp_path / "ig") as server:
        server.set_processing_delay(0.05)
        yield server


@pytest.fixture
def account(fake: FakeInstagram) -> str:
    return fake.add_account("mdame.reels", TOKEN)


@pytest.fixture
def client(fake: FakeInstagram) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.graph_url(), timeout=5) as c:
        yield c


def _create(client: httpx.Client, account: str, caption: str = "hello #mdame") -> dict[str, Any]:
    r = client.post(
        f"{account}/media",
        params={
            "media_type": "REELS",
            "upload_type": "resumable",
            "caption": caption,
            "share_to_feed": "true",
            "access_token": TOKEN,
        },
    )
    assert r.status_code == 200, r.text
    return dict(r.json())


def _upload(
    client: httpx.Client, uri: str, data: bytes, offset: int, total: int, token: str = TOKEN
) -> httpx.Response:
    headers = {"Authorization": f"OAuth {token}", "offset": str(offset), "file_size": str(total)}
    return client.post(uri, content=data, headers=headers)


def _status(client: httpx.Client, cid: str) -> dict[str, Any]:
    r = client.get(cid, params={"fields": "status_code,status,video_status", "access_token": TOKEN})
    assert r.status_code == 200, r.text
    return dict(r.json())


def _wait_finished(client: httpx.Client, cid: str) -> dict[str, Any]:
    for _ in range(100):
        body = _status(client, cid)
        if body["status_code"] != "IN_PROGRESS":
            return body
        time.sleep(0.02)  # the processing delay is 50 ms
    raise AssertionError("container never left IN_PROGRESS")


def _publish(client: httpx.Client, account: str, cid: str) -> httpx.Response:
    return client.post(f"{account}/media_publish", params={"creation_id": cid}, headers=_bearer())


def _bearer(token: str = TOKEN) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def _ready(client: httpx.Client, account: str, caption: str) -> str:
    """A FINISHED container holding VIDEO."""
    created = _create(client, account, caption)
    assert _upload(client, created["uri"], VIDEO, 0, len(VIDEO)).status_code == 200
    assert _wait_finished(client, created["id"])["status_code"] == "FINISHED"
    return str(created["id"])


def _error(r: httpx.Response) -> dict[str, Any]:
    body = r.json()
    assert set(body) == {"error"}, body
    assert {"message", "type", "code", "fbtrace_id"} <= set(body["error"]), body
    return dict(body["error"])


# -- the happy path ----------------------------------------------------------------------
def test_happy_path_two_part_upload_publish_and_find_by_caption(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    created = _create(client, account, "Morning news [mdame:abc123]")
    cid = created["id"]
    assert created["uri"] == f"{fake.base_url}ig-api-upload/v24.0/{cid}"
    assert _status(client, cid)["video_status"]["uploading_phase"]["status"] == "not_started"

    half = len(VIDEO) // 2
    first = _upload(client, created["uri"], VIDEO[:half], 0, len(VIDEO))
    assert first.json() == {"success": True, "message": "Upload successful."}
    mid = _status(client, cid)
    assert mid["status_code"] == "IN_PROGRESS"
    assert mid["video_status"]["uploading_phase"] == {
        "status": "in_progress",
        "bytes_transferred": half,
    }
    # Too early: the documented "not ready" error.
    early = _error(_publish(client, account, cid))
    assert (early["code"], early["error_subcode"]) == (9007, 2207027)

    assert _upload(client, created["uri"], VIDEO[half:], half, len(VIDEO)).status_code == 200
    done = _wait_finished(client, cid)
    assert done["status_code"] == "FINISHED"
    assert done["video_status"]["uploading_phase"]["bytes_transferred"] == len(VIDEO)

    published = _publish(client, account, cid)
    assert published.status_code == 200, published.text
    media_id = published.json()["id"]
    assert _status(client, cid)["status_code"] == "PUBLISHED"
    assert fake.media_bytes(media_id) == VIDEO
    assert fake.publishing_usage(account) == 1

    listed = client.get(
        f"{account}/media",
        params={
            "fields": "id,caption,media_type,media_product_type,timestamp,permalink",
            "access_token": TOKEN,
        },
    ).json()
    found = [m for m in listed["data"] if "[mdame:abc123]" in m["caption"]]
    assert [m["id"] for m in found] == [media_id]
    assert found[0]["media_type"] == "VIDEO"
    assert found[0]["media_product_type"] == "REELS"
    assert found[0]["permalink"].startswith("https://www.instagram.com/reel/")
    assert found[0]["timestamp"].endswith("+0000")

    node = client.get(media_id, params={"fields": "like_count,caption"}, headers=_bearer())
    assert node.json() == {
        "like_count": 0,
        "caption": "Morning news [mdame:abc123]",
        "id": media_id,
    }
    metrics = {"metric": "views,likes", "access_token": TOKEN}
    zeros = client.get(f"{media_id}/insights", params=metrics).json()["data"]
    assert [(d["name"], d["values"][0]["value"]) for d in zeros] == [("views", 0), ("likes", 0)]
    fake.set_insights(media_id, views=1234, likes=56)
    later = client.get(f"{media_id}/insights", params=metrics).json()["data"]
    assert [d["values"][0]["value"] for d in later] == [1234, 56]
    assert later[0]["period"] == "lifetime"
    assert later[0]["id"] == f"{media_id}/insights/views/lifetime"


def test_retired_insights_metric_is_refused(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    media_id = _publish(client, account, _ready(client, account, "x")).json()["id"]
    r = client.get(f"{media_id}/insights", params={"metric": "plays", "access_token": TOKEN})
    assert r.status_code == 400
    assert _error(r)["code"] == 100


# -- resumable uploads -------------------------------------------------------------------
def test_interrupted_upload_resumes_from_the_offset_the_server_reports(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    created = _create(client, account)
    fake.faults.push("interrupt_upload")
    with pytest.raises(httpx.TransportError):
        _upload(client, created["uri"], VIDEO, 0, len(VIDEO))
    held = _status(client, created["id"])["video_status"]["uploading_phase"]
    assert held["status"] == "in_progress"
    assert 0 < held["bytes_transferred"] < len(VIDEO)

    offset = held["bytes_transferred"]
    assert _upload(client, created["uri"], VIDEO[offset:], offset, len(VIDEO)).status_code == 200
    assert _wait_finished(client, created["id"])["status_code"] == "FINISHED"
    media_id = _publish(client, account, created["id"]).json()["id"]
    assert fake.media_bytes(media_id) == VIDEO


def test_wrong_offset_and_changed_file_size_are_refused(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    created = _create(client, account)
    assert _upload(client, created["uri"], VIDEO[:100], 0, len(VIDEO)).status_code == 200
    for offset, total in ((0, len(VIDEO)), (200, len(VIDEO)), (100, len(VIDEO) + 1)):
        r = _upload(client, created["uri"], VIDEO[offset : offset + 10], offset, total)
        assert r.status_code == 400
        assert set(r.json()) == {"debug_info"}
        assert r.json()["debug_info"]["retriable"] is False
    assert _status(client, created["id"])["video_status"]["uploading_phase"] == {
        "status": "in_progress",
        "bytes_transferred": 100,
    }
    missing = client.post(created["uri"], content=b"x", headers={"Authorization": f"OAuth {TOKEN}"})
    assert missing.json()["debug_info"]["type"] == "ParameterValidationError"


def test_upload_needs_the_owner_token_in_an_oauth_header(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    created = _create(client, account)
    fake.add_account("someone.else", "IGAA-other")
    for token in ("IGAA-unknown", "IGAA-other"):
        r = _upload(client, created["uri"], VIDEO, 0, len(VIDEO), token=token)
        assert r.status_code == 400
        assert r.json()["debug_info"]["type"] == "ProcessingFailedError"
    bearer = client.post(
        created["uri"],
        content=VIDEO,
        headers={"Authorization": f"Bearer {TOKEN}", "offset": "0", "file_size": str(len(VIDEO))},
    )
    assert bearer.status_code == 400
    assert fake.containers()[created["id"]]["received"] == 0


def test_restart_mid_upload_keeps_the_bytes(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    created = _create(client, account)
    half = len(VIDEO) // 2
    assert _upload(client, created["uri"], VIDEO[:half], 0, len(VIDEO)).status_code == 200
    fake.restart()
    with httpx.Client(base_url=fake.graph_url(), timeout=5) as again:
        held = _status(again, created["id"])["video_status"]["uploading_phase"]
        assert held["bytes_transferred"] == half
        assert _upload(again, created["uri"], VIDEO[half:], half, len(VIDEO)).status_code == 200
        assert _wait_finished(again, created["id"])["status_code"] == "FINISHED"
        media_id = _publish(again, account, created["id"]).json()["id"]
    assert fake.media_bytes(media_id) == VIDEO


# -- publishing --------------------------------------------------------------------------
def test_publishing_twice_or_an_unknown_container_is_refused(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    cid = _ready(client, account, "once")
    assert _publish(client, account, cid).status_code == 200
    for creation_id in (cid, "17900000000000000"):
        err = _error(_publish(client, account, creation_id))
        assert (err["code"], err["error_subcode"]) == (24, 2207008)
    assert len(fake.media(account)) == 1


def test_publishing_limit_is_a_rolling_window(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    fake.set_publish_limit(2, window_s=0.6)
    containers = [_ready(client, account, f"post {i}") for i in range(3)]
    assert _publish(client, account, containers[0]).status_code == 200
    assert _publish(client, account, containers[1]).status_code == 200
    over = _publish(client, account, containers[2])
    assert over.status_code == 400
    err = _error(over)
    assert (err["code"], err["error_subcode"]) == (9, 2207042)
    limit = client.get(
        f"{account}/content_publishing_limit",
        params={"fields": "quota_usage,config", "access_token": TOKEN},
    ).json()
    assert limit == {
        "data": [{"quota_usage": 2, "config": {"quota_total": 2, "quota_duration": 0}}]
    }
    time.sleep(0.65)  # the window rolls past the first two posts
    assert fake.publishing_usage(account) == 0
    assert _publish(client, account, containers[2]).status_code == 200


def test_default_publishing_limit_is_100_a_day(account: str, client: httpx.Client) -> None:
    r = client.get(f"{account}/content_publishing_limit", params={"access_token": TOKEN})
    assert r.json() == {"data": [{"quota_usage": 0}]}
    config = client.get(
        f"{account}/content_publishing_limit", params={"fields": "config", "access_token": TOKEN}
    ).json()["data"][0]["config"]
    assert config == {"quota_total": 100, "quota_duration": 86400}


def test_container_expires_after_its_lifetime(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    fake.set_container_lifetime(0.2)
    created = _create(client, account)
    time.sleep(0.25)
    assert _status(client, created["id"])["status_code"] == "EXPIRED"
    assert _upload(client, created["uri"], VIDEO, 0, len(VIDEO)).status_code == 400
    err = _error(_publish(client, account, created["id"]))
    assert (err["code"], err["error_subcode"]) == (-2, 2207020)


def test_only_resumable_reels_are_served(account: str, client: httpx.Client) -> None:
    story = client.post(f"{account}/media", params={"media_type": "STORIES"}, headers=_bearer())
    assert _error(story)["error_subcode"] == 2207023
    by_url = client.post(
        f"{account}/media",
        params={"media_type": "REELS", "video_url": "https://example.invalid/a.mp4"},
        headers=_bearer(),
    )
    assert (_error(by_url)["code"], _error(by_url)["error_subcode"]) == (9004, 2207052)
    long_caption = client.post(
        f"{account}/media",
        json={"media_type": "REELS", "upload_type": "resumable", "caption": "x" * 2201},
        headers=_bearer(),
    )
    assert _error(long_caption)["error_subcode"] == 2207010


def test_media_list_pages_with_cursors(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    ids = [
        _publish(client, account, _ready(client, account, f"n{i}")).json()["id"] for i in range(3)
    ]
    first = client.get(
        f"{account}/media", params={"fields": "caption", "limit": "2", "access_token": TOKEN}
    ).json()
    assert [m["caption"] for m in first["data"]] == ["n2", "n1"]
    assert "previous" not in first["paging"]
    second = client.get(first["paging"]["next"]).json()
    assert [m["id"] for m in second["data"]] == [ids[0]]
    assert "next" not in second["paging"]
    back = client.get(second["paging"]["previous"]).json()
    assert [m["caption"] for m in back["data"]] == ["n2", "n1"]


# -- tokens ------------------------------------------------------------------------------
def test_refresh_access_token_and_revocation(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    refreshed = client.get(
        f"{fake.base_url}refresh_access_token",
        params={"grant_type": "ig_refresh_token", "access_token": TOKEN},
    ).json()
    assert refreshed["token_type"] == "bearer"
    assert refreshed["expires_in"] == 60 * 86400
    fresh = refreshed["access_token"]
    assert client.get("me", params={"fields": "username"}, headers=_bearer(fresh)).json() == {
        "username": "mdame.reels",
        "id": account,
    }
    fake.revoke(TOKEN)
    r = client.get(f"{account}/media", headers=_bearer())
    assert r.status_code == 400
    err = _error(r)
    assert (err["type"], err["code"], err["error_subcode"]) == ("OAuthException", 190, 458)
    again = client.get(
        f"{fake.base_url}refresh_access_token",
        params={"grant_type": "ig_refresh_token", "access_token": TOKEN},
    )
    assert _error(again)["code"] == 190
    assert client.get(f"{account}/media", headers=_bearer(fresh)).status_code == 200


def test_unknown_expired_and_missing_tokens(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    unknown = _error(client.get(f"{account}/media", headers=_bearer("nope")))
    assert unknown["code"] == 190 and "error_subcode" not in unknown
    fake.expire_token(TOKEN)
    assert _error(client.get(f"{account}/media", headers=_bearer()))["error_subcode"] == 463
    assert _error(client.get(f"{account}/media"))["code"] == 104


def test_another_accounts_objects_do_not_exist(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    cid = _ready(client, account, "mine")
    fake.add_account("someone.else", "IGAA-other")
    for path in (cid, f"{account}/media"):
        err = _error(client.get(path, headers=_bearer("IGAA-other")))
        assert (err["code"], err["error_subcode"]) == (100, 33)


# -- rate limiting -----------------------------------------------------------------------
@pytest.mark.parametrize("code", [4, 17, 32, 80002])
def test_call_budget_throttles(
    fake: FakeInstagram, account: str, client: httpx.Client, code: int
) -> None:
    fake.set_call_budget(2, window_s=60, code=code)
    for _ in range(2):
        assert client.get(f"{account}/media", headers=_bearer()).status_code == 200
    r = client.get(f"{account}/media", headers=_bearer())
    assert r.status_code == 403
    err = _error(r)
    assert (err["code"], err["is_transient"]) == (code, True)
    assert f"(#{code})" in err["message"]
    fake.set_call_budget(None)
    assert client.get(f"{account}/media", headers=_bearer()).status_code == 200


# -- faults ------------------------------------------------------------------------------
@pytest.mark.parametrize("fault", ["create_5xx", "status_5xx", "publish_5xx", "list_5xx"])
def test_graph_5xx_faults_fire_once(
    fake: FakeInstagram, account: str, client: httpx.Client, fault: str
) -> None:
    cid = _ready(client, account, "five hundred") if fault != "create_5xx" else ""
    calls = {
        "create_5xx": lambda: client.post(
            f"{account}/media",
            params={"media_type": "REELS", "upload_type": "resumable"},
            headers=_bearer(),
        ),
        "status_5xx": lambda: client.get(cid, headers=_bearer()),
        "publish_5xx": lambda: _publish(client, account, cid),
        "list_5xx": lambda: client.get(f"{account}/media", headers=_bearer()),
    }
    fake.faults.push(fault)
    failed = calls[fault]()
    assert failed.status_code == 500
    assert (_error(failed)["code"], _error(failed)["is_transient"]) == (2, True)
    assert fake.media(account) == []  # a 5xx publish published nothing
    assert calls[fault]().status_code == 200


def test_upload_5xx_stores_nothing(fake: FakeInstagram, account: str, client: httpx.Client) -> None:
    created = _create(client, account)
    fake.faults.push("upload_5xx")
    r = _upload(client, created["uri"], VIDEO, 0, len(VIDEO))
    assert r.status_code == 503
    assert r.json()["debug_info"]["retriable"] is True
    assert fake.containers()[created["id"]]["received"] == 0
    assert _upload(client, created["uri"], VIDEO, 0, len(VIDEO)).status_code == 200


@pytest.mark.parametrize("stored", [True, False])
def test_dropped_final_upload_request(
    fake: FakeInstagram, account: str, client: httpx.Client, stored: bool
) -> None:
    created = _create(client, account)
    half = len(VIDEO) // 2
    fake.faults.push("drop_upload", stored=stored)
    # Not the final request: the fault waits for the one that carries the last byte.
    assert _upload(client, created["uri"], VIDEO[:half], 0, len(VIDEO)).status_code == 200
    with pytest.raises(httpx.TransportError):
        _upload(client, created["uri"], VIDEO[half:], half, len(VIDEO))
    held = _status(client, created["id"])["video_status"]["uploading_phase"]["bytes_transferred"]
    assert held == (len(VIDEO) if stored else half)
    if not stored:
        assert _upload(client, created["uri"], VIDEO[half:], half, len(VIDEO)).status_code == 200
    assert _wait_finished(client, created["id"])["status_code"] == "FINISHED"


@pytest.mark.parametrize(
    ("fault", "status_code", "code", "subcode"),
    [("container_error", "ERROR", -1, 2207053), ("container_expired", "EXPIRED", -2, 2207020)],
)
def test_container_fails_processing(
    fake: FakeInstagram,
    account: str,
    client: httpx.Client,
    fault: str,
    status_code: str,
    code: int,
    subcode: int,
) -> None:
    fake.faults.push(fault)
    created = _create(client, account)
    assert _upload(client, created["uri"], VIDEO, 0, len(VIDEO)).status_code == 200
    body = _wait_finished(client, created["id"])
    assert body["status_code"] == status_code
    if status_code == "ERROR":
        assert "2207026" in body["status"]
    err = _error(_publish(client, account, created["id"]))
    assert (err["code"], err["error_subcode"]) == (code, subcode)


def test_revoke_token_fault(fake: FakeInstagram, account: str, client: httpx.Client) -> None:
    fake.faults.push("revoke_token")
    err = _error(client.get(f"{account}/media", headers=_bearer()))
    assert (err["code"], err["error_subcode"]) == (190, 458)
    assert _error(client.get(f"{account}/media", headers=_bearer()))["code"] == 190


def test_lost_publish_answer_is_published_and_findable(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    cid = _ready(client, account, "lost answer [mdame:zz9]")
    fake.faults.push("lost_publish")
    with pytest.raises(httpx.TransportError):
        _publish(client, account, cid)
    assert _status(client, cid)["status_code"] == "PUBLISHED"
    assert fake.publishing_usage(account) == 1
    listed = client.get(f"{account}/media", params={"fields": "caption"}, headers=_bearer())
    assert [m["caption"] for m in listed.json()["data"]] == ["lost answer [mdame:zz9]"]
    assert _error(_publish(client, account, cid))["error_subcode"] == 2207008


def test_throttle_fault_and_faults_over_http(
    fake: FakeInstagram, account: str, client: httpx.Client
) -> None:
    pushed = client.post(f"{fake.base_url}_fake/faults", json={"fault": "throttle", "code": 17})
    assert pushed.json()["pending"] == [{"fault": "throttle", "code": 17}]
    assert _error(client.get(f"{account}/media", headers=_bearer()))["code"] == 17
    assert client.get(f"{account}/media", headers=_bearer()).status_code == 200
    bad = client.post(f"{fake.base_url}_fake/faults", json={"fault": "no_such_fault"})
    assert bad.status_code == 400


def test_requests_are_logged(fake: FakeInstagram, account: str, client: httpx.Client) -> None:
    client.get(f"{account}/media", params={"fields": "id"}, headers=_bearer())
    assert f"GET /v24.0/{account}/media?fields=id" in fake.requests()
