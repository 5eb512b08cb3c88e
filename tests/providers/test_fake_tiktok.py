"""The local TikTok server (fakes.tiktok) speaks the documented protocol: tokens, creator info,
direct-post init with the chunk rules, chunked PUTs, post status, the video list, the limits and
the faults. httpx talks to it on 127.0.0.1; its clock is the test's, so nothing sleeps."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from fakes import tiktok
from fakes.tiktok import FakeTikTok

KiB = 1024
# Shrunk chunk limits (the real ones are 5, 64 and 128 MiB) keep the bodies small.
MIN, MAX, FINAL = 256 * KiB, 1024 * KiB, 2048 * KiB
VIDEO = bytes(range(256)) * (10 * KiB + 1)  # 2.5 MiB and 256 bytes: 5 chunks of 512 KiB
CHUNK = 512 * KiB


class Clock:
    """A clock the test moves on by hand."""

    def __init__(self) -> None:
        self.now = time.time()

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def fake(tmp_path: Path, clock: Clock) -> Iterator[FakeTikTok]:
    with tiktok.running(tmp_path / "tiktok") as server:
        server.clock = clock
        server.set_limits(min_chunk=MIN, max_chunk=MAX, max_final_chunk=FINAL)
        yield server


@pytest.fixture
def http(fake: FakeTikTok) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=fake.base_url, timeout=10) as client:
        yield client


def refresh(http: httpx.Client, refresh_token: str) -> httpx.Response:
    form = {
        "client_key": "ck",
        "client_secret": "cs",
        "grant_type": "refresh_token",
        "refresh_token": refresh_token,
    }
    return http.post("/v2/oauth/token/", data=form)


def login(fake: FakeTikTok, http: httpx.Client, username: str = "maker", **kw: Any) -> str:
    """A creator with a fresh access token; returns the token."""
    open_id = fake.add_creator(username, f"rft.{username}", **kw)
    answer = refresh(http, fake.refresh_token(open_id))
    assert answer.status_code == 200, answer.text
    return str(answer.json()["access_token"])


def api(http: httpx.Client, token: str, path: str, body: Any = None, **kw: Any) -> httpx.Response:
    answer = http.post(path, json=body, headers={"Authorization": f"Bearer {token}"}, **kw)
    envelope = answer.json()
    assert set(envelope) == {"data", "error"}, envelope
    assert set(envelope["error"]) == {"code", "message", "log_id"} and envelope["error"]["log_id"]
    return answer


def code(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["error"]["code"]


def init(
    http: httpx.Client,
    token: str,
    size: int = len(VIDEO),
    chunk: int = CHUNK,
    count: int | None = None,
    privacy: str = "PUBLIC_TO_EVERYONE",
    title: str = "a #cat video [mdame:abc123]",
) -> httpx.Response:
    body = {
        "post_info": {"title": title, "privacy_level": privacy, "is_aigc": True},
        "source_info": {
            "source": "FILE_UPLOAD",
            "video_size": size,
            "chunk_size": chunk,
            "total_chunk_count": size // chunk if count is None else count,
        },
    }
    return api(http, token, "/v2/post/publish/video/init/", body)


def put(
    http: httpx.Client,
    url: str,
    data: bytes,
    first: int,
    total: int = len(VIDEO),
    headers: dict[str, str] | None = None,
) -> httpx.Response:
    sent = {
        "Content-Type": "video/mp4",
        "Content-Range": f"bytes {first}-{first + len(data) - 1}/{total}",
        **(headers or {}),
    }
    return http.put(url, content=data, headers=sent)


def chunks(data: bytes = VIDEO, chunk: int = CHUNK) -> list[tuple[int, bytes]]:
    """(first byte, bytes) of each chunk; the last one takes the trailing bytes."""
    count = len(data) // chunk
    starts = [i * chunk for i in range(count)]
    return [(s, data[s : s + chunk] if i < count - 1 else data[s:]) for i, s in enumerate(starts)]


def status(http: httpx.Client, token: str, publish_id: str) -> dict[str, Any]:
    answer = api(http, token, "/v2/post/publish/status/fetch/", {"publish_id": publish_id})
    assert answer.status_code == 200, answer.text
    return dict(answer.json()["data"])


def video_list(
    http: httpx.Client, token: str, fields: str = "id,title,video_description", **body: Any
) -> httpx.Response:
    return api(http, token, f"/v2/video/list/?fields={fields}", body)


def started(fake: FakeTikTok, http: httpx.Client, **kw: Any) -> tuple[str, str, str]:
    """A creator's token and an accepted init: (token, publish_id, upload_url)."""
    token = login(fake, http, audited=True)
    answer = init(http, token, **kw)
    assert answer.status_code == 200, answer.text
    data = answer.json()["data"]
    return token, data["publish_id"], data["upload_url"]


# -- the happy path ------------------------------------------------------------------------


def test_a_public_post_goes_from_token_to_the_video_list(
    fake: FakeTikTok, http: httpx.Client, clock: Clock
) -> None:
    open_id = fake.add_creator("maker", "rft.first", audited=True)
    tokens = refresh(http, "rft.first").json()
    assert tokens["open_id"] == open_id and tokens["token_type"] == "Bearer"
    assert tokens["expires_in"] == 7200 and tokens["scope"].split(",") == tiktok.DEFAULT_SCOPES
    assert tokens["refresh_token"] != "rft.first"  # rotated: the one sent no longer works
    assert refresh(http, "rft.first").json()["error"] == "invalid_grant"
    token = tokens["access_token"]

    info = api(http, token, "/v2/post/publish/creator_info/query/")
    assert code(info) == (200, "ok")
    assert info.json()["data"]["privacy_level_options"] == tiktok.PUBLIC_OPTIONS
    assert info.json()["data"]["creator_username"] == "maker"

    answer = init(http, token)
    assert code(answer) == (200, "ok")
    publish_id, url = answer.json()["data"]["publish_id"], answer.json()["data"]["upload_url"]
    assert url.startswith(f"{fake.base_url}upload/?upload_id=") and "upload_token=" in url

    plan = chunks()
    assert len(plan) == 5 and len(plan[-1][1]) == CHUNK + 256
    for i, (first, data) in enumerate(plan):
        sent = put(http, url, data, first)
        last = i == len(plan) - 1
        assert sent.status_code == (201 if last else 206)
        assert sent.headers["Content-Range"] == f"bytes 0-{first + len(data)}/{len(VIDEO)}"
        if not last:
            got = status(http, token, publish_id)
            assert got["status"] == "PROCESSING_UPLOAD"
            assert got["uploaded_bytes"] == first + len(data)

    processing = status(http, token, publish_id)
    assert processing["status"] == "PROCESSING_UPLOAD" and processing["uploaded_bytes"] == len(
        VIDEO
    )
    assert processing["publicaly_available_post_id"] == []
    clock.advance(fake.processing_delay)
    done = status(http, token, publish_id)
    assert done["status"] == "PUBLISH_COMPLETE" and len(done["publicaly_available_post_id"]) == 1
    post_id = done["publicaly_available_post_id"][0]
    assert isinstance(post_id, int)  # list<int64>, while the video list's id is a string

    listed = video_list(http, token).json()["data"]
    assert listed["has_more"] is False
    assert listed["videos"] == [
        {
            "id": str(post_id),
            "title": "a #cat video [mdame:abc123]",
            "video_description": "a #cat video [mdame:abc123]",
        }
    ]
    assert fake.video_bytes(str(post_id)) == VIDEO == fake.video_bytes(publish_id)
    assert fake.counters(open_id)["init"] == 1 and fake.counters(open_id)["posts"] == 1
    assert any(line.startswith("PUT /upload/") for line in fake.requests())


def test_moderation_holds_the_post_id_and_the_listing(
    fake: FakeTikTok, http: httpx.Client, clock: Clock
) -> None:
    fake.moderation_delay = 30.0
    token, publish_id, url = started(fake, http)
    for first, data in chunks():
        put(http, url, data, first)
    clock.advance(fake.processing_delay)
    held = status(http, token, publish_id)
    assert held["status"] == "PUBLISH_COMPLETE" and held["publicaly_available_post_id"] == []
    assert video_list(http, token).json()["data"]["videos"] == []
    clock.advance(30)
    assert status(http, token, publish_id)["publicaly_available_post_id"]
    assert len(video_list(http, token).json()["data"]["videos"]) == 1


def test_a_small_video_goes_whole(fake: FakeTikTok, http: httpx.Client) -> None:
    small = VIDEO[: MIN - 1]
    token, publish_id, url = started(fake, http, size=len(small), chunk=len(small), count=1)
    answer = put(http, url, small, 0, total=len(small))
    assert answer.status_code == 201
    assert fake.video_bytes(publish_id) == small


# -- tokens ----------------------------------------------------------------------------------


def test_tokens_expire_are_revoked_and_come_from_codes(
    fake: FakeTikTok, http: httpx.Client, clock: Clock
) -> None:
    token = login(fake, http)
    open_id = tiktok.open_id_for("maker")
    clock.advance(fake.access_token_ttl)
    assert code(api(http, token, "/v2/post/publish/creator_info/query/")) == (
        401,
        "access_token_invalid",
    )
    token = refresh(http, fake.refresh_token(open_id)).json()["access_token"]
    assert code(api(http, token, "/v2/post/publish/creator_info/query/"))[0] == 200

    current = fake.refresh_token(open_id)
    fake.revoke(open_id)
    assert code(api(http, token, "/v2/post/publish/creator_info/query/"))[0] == 401
    refused = refresh(http, current)
    assert refused.status_code == tiktok.OAUTH_ERROR_STATUS
    assert refused.json()["error"] == "invalid_grant" and refused.json()["log_id"]

    consent = http.get(
        "/v2/auth/authorize/",
        params={"client_key": "ck", "redirect_uri": "https://app/cb", "state": "s1"},
    )
    assert consent.status_code == 302
    target = httpx.URL(consent.headers["Location"])
    assert target.params["state"] == "s1"
    form = {
        "client_key": "ck",
        "client_secret": "cs",
        "grant_type": "authorization_code",
        "code": target.params["code"],
        "redirect_uri": "https://app/cb",
    }
    granted = http.post("/v2/oauth/token/", data=form)
    assert granted.status_code == 200 and granted.json()["open_id"] == open_id
    assert (
        code(api(http, granted.json()["access_token"], "/v2/post/publish/creator_info/query/"))[0]
        == 200
    )
    again = http.post("/v2/oauth/token/", data=form)  # a code works once
    assert again.json()["error"] == "invalid_grant"
    assert refresh(http, "").json()["error"] == "invalid_grant"
    no_client = http.post("/v2/oauth/token/", data={"grant_type": "refresh_token"})
    assert no_client.json()["error"] == "invalid_client"


def test_a_missing_scope_is_refused(fake: FakeTikTok, http: httpx.Client) -> None:
    token = login(fake, http, audited=True, scopes=["user.info.basic", "video.publish"])
    assert code(video_list(http, token)) == (401, "scope_not_authorized")
    assert code(init(http, token))[0] == 200


# -- the chunk rules -------------------------------------------------------------------------

BIG = 3 * MAX // 2  # over the largest chunk: needs two or more


@pytest.mark.parametrize(
    ("size", "chunk", "count", "limits"),
    [
        pytest.param(len(VIDEO), MIN - 1, len(VIDEO) // (MIN - 1), {}, id="chunk-under-min"),
        pytest.param(3 * MAX, MAX + 1, 2, {}, id="chunk-over-max"),
        pytest.param(len(VIDEO), CHUNK, 6, {}, id="count-not-floor"),
        pytest.param(len(VIDEO), CHUNK, 5, {"max_chunks": 4}, id="over-max-chunks"),
        pytest.param(MIN - 1, MIN // 2, 1, {}, id="small-video-not-whole"),
        pytest.param(MIN - 1, MIN - 1, 2, {}, id="small-video-two-chunks"),
        pytest.param(BIG, MAX, 1, {}, id="large-video-one-chunk"),
        pytest.param(2 * MAX + MAX // 2, MAX, 2, {"max_final_chunk": MAX + 1}, id="final-too-big"),
        pytest.param(0, 0, 0, {}, id="empty"),
    ],
)
def test_init_refuses_a_plan_against_the_chunk_rules(
    fake: FakeTikTok,
    http: httpx.Client,
    size: int,
    chunk: int,
    count: int,
    limits: dict[str, int],
) -> None:
    token = login(fake, http, audited=True)
    fake.set_limits(**limits)
    answer = init(http, token, size=size, chunk=chunk, count=count)
    assert code(answer) == (400, "invalid_params")
    assert "chunk" in answer.json()["error"]["message"]
    assert fake.publishes() == []


def test_each_put_is_checked_against_the_plan_and_the_progress(
    fake: FakeTikTok, http: httpx.Client
) -> None:
    token, publish_id, url = started(fake, http)
    (first0, data0), (first1, data1) = chunks()[:2]
    assert put(http, url, data1, first1).status_code == 416  # not sequential
    assert put(http, url, data0[:-1], 0).status_code == 400  # a chunk that is not chunk_size
    wrong_length = put(http, url, data0, 0, headers={"Content-Range": f"bytes 0-9/{len(VIDEO)}"})
    assert wrong_length.status_code == 400
    assert put(http, url, data0, 0, total=len(VIDEO) + 1).status_code == 400
    assert put(http, url, data0, 0, headers={"Content-Type": "text/plain"}).status_code == 400
    assert put(http, url, data0, 0, headers={"Content-Range": "bytes */2"}).status_code == 400
    assert put(http, url.replace("upload_token=", "upload_token=x"), data0, 0).status_code == 404
    assert put(http, f"{fake.base_url}upload/?upload_id=nope", data0, 0).status_code == 404
    assert status(http, token, publish_id)["uploaded_bytes"] == 0

    assert put(http, url, data0, 0).status_code == 206
    resent = put(http, url, data0, 0)  # already there: the progress says where to go on
    assert resent.status_code == 416
    assert resent.headers["Content-Range"] == f"bytes 0-{CHUNK}/{len(VIDEO)}"
    for first, data in chunks()[1:]:
        assert put(http, url, data, first).status_code in (201, 206)
    assert fake.video_bytes(publish_id) == VIDEO


def test_pull_from_url_needs_a_verified_domain(fake: FakeTikTok, http: httpx.Client) -> None:
    token = login(fake, http, audited=True)
    body = {
        "post_info": {"privacy_level": "SELF_ONLY"},
        "source_info": {"source": "PULL_FROM_URL", "video_url": "https://example.com/v.mp4"},
    }
    answer = api(http, token, "/v2/post/publish/video/init/", body)
    assert code(answer) == (403, "url_ownership_unverified")


# -- privacy ---------------------------------------------------------------------------------


def test_an_unaudited_app_posts_only_self_only_to_private_accounts(
    fake: FakeTikTok, http: httpx.Client, clock: Clock
) -> None:
    token = login(fake, http)  # unaudited: the account is private
    info = api(http, token, "/v2/post/publish/creator_info/query/").json()["data"]
    assert info["privacy_level_options"] == tiktok.PRIVATE_OPTIONS
    assert code(init(http, token, privacy="PUBLIC_TO_EVERYONE")) == (
        403,
        "privacy_level_option_mismatch",
    )
    assert code(init(http, token, privacy="MUTUAL_FOLLOW_FRIENDS")) == (
        403,
        "unaudited_client_can_only_post_to_private_accounts",
    )
    public = login(fake, http, "open", private_account=False)
    for level in ("PUBLIC_TO_EVERYONE", "SELF_ONLY"):
        assert code(init(http, public, privacy=level)) == (
            403,
            "unaudited_client_can_only_post_to_private_accounts",
        )

    answer = init(http, token, privacy="SELF_ONLY")
    assert code(answer) == (200, "ok")
    publish_id, url = answer.json()["data"]["publish_id"], answer.json()["data"]["upload_url"]
    for first, data in chunks():
        put(http, url, data, first)
    clock.advance(fake.processing_delay)
    done = status(http, token, publish_id)
    assert done["status"] == "PUBLISH_COMPLETE" and done["publicaly_available_post_id"] == []
    assert video_list(http, token).json()["data"]["videos"] == []  # public videos only
    assert [v["privacy_level"] for v in fake.videos(tiktok.open_id_for("maker"))] == ["SELF_ONLY"]


def test_a_privacy_level_must_be_among_the_options(fake: FakeTikTok, http: httpx.Client) -> None:
    token = login(fake, http, audited=True, privacy_options=["SELF_ONLY"])
    assert code(init(http, token, privacy="PUBLIC_TO_EVERYONE")) == (
        403,
        "privacy_level_option_mismatch",
    )
    assert code(init(http, token, privacy="")) == (403, "privacy_level_option_mismatch")
    assert code(init(http, token, privacy="SELF_ONLY"))[0] == 200


# -- limits ----------------------------------------------------------------------------------


def test_init_is_limited_to_six_a_minute_per_access_token(
    fake: FakeTikTok, http: httpx.Client, clock: Clock
) -> None:
    token = login(fake, http, audited=True)
    open_id = tiktok.open_id_for("maker")
    for _ in range(6):
        assert code(init(http, token))[0] == 200
    assert code(init(http, token)) == (429, "rate_limit_exceeded")
    assert fake.counters(open_id)["init"] == 6 and fake.counters(open_id)["throttled"] == 1
    other = refresh(http, fake.refresh_token(open_id)).json()["access_token"]
    assert code(init(http, other))[0] == 200  # the limit is per access token
    clock.advance(fake.rate_window)
    assert code(init(http, token))[0] == 200


@pytest.mark.parametrize(
    ("path", "body", "limit"),
    [
        ("/v2/post/publish/status/fetch/", "publish", 30),
        ("/v2/post/publish/creator_info/query/", None, 20),
    ],
)
def test_status_and_creator_info_have_their_own_limits(
    fake: FakeTikTok, http: httpx.Client, clock: Clock, path: str, body: Any, limit: int
) -> None:
    token, publish_id, _url = started(fake, http)
    payload = {"publish_id": publish_id} if body else None
    for _ in range(limit):
        assert code(api(http, token, path, payload))[0] == 200
    assert code(api(http, token, path, payload)) == (429, "rate_limit_exceeded")
    assert code(init(http, token))[0] == 200  # another bucket
    clock.advance(fake.rate_window)
    assert code(api(http, token, path, payload))[0] == 200


def test_the_daily_post_cap_and_the_unaudited_user_cap(
    fake: FakeTikTok, http: httpx.Client, clock: Clock
) -> None:
    token = login(fake, http, audited=True, daily_post_cap=2)
    assert code(init(http, token))[0] == 200
    clock.advance(3600)
    assert code(init(http, token))[0] == 200
    assert code(init(http, token)) == (403, "spam_risk_too_many_posts")
    # creator_info says so with HTTP 200, on purpose (the docs)
    assert code(api(http, token, "/v2/post/publish/creator_info/query/")) == (
        200,
        "spam_risk_too_many_posts",
    )
    clock.advance(fake.post_window - 3600)
    token = refresh(http, fake.refresh_token(tiktok.open_id_for("maker"))).json()["access_token"]
    assert code(init(http, token))[0] == 200  # the first post left the 24-hour window

    fake.unaudited_user_cap = 1
    first = login(fake, http, "first")
    assert code(init(http, first, privacy="SELF_ONLY"))[0] == 200
    second = login(fake, http, "second")
    assert code(init(http, second, privacy="SELF_ONLY")) == (403, "reached_active_user_cap")
    assert code(init(http, first, privacy="SELF_ONLY"))[0] == 200  # already counted


# -- status and list -------------------------------------------------------------------------


def test_status_refuses_unknown_and_foreign_publishes(fake: FakeTikTok, http: httpx.Client) -> None:
    token, publish_id, _url = started(fake, http)
    stranger = login(fake, http, "stranger", audited=True)
    path = "/v2/post/publish/status/fetch/"
    assert code(api(http, token, path, {"publish_id": "v_pub_file~nope"})) == (
        400,
        "invalid_publish_id",
    )
    assert code(api(http, stranger, path, {"publish_id": publish_id})) == (
        400,
        "token_not_authorized_for_specified_publish_id",
    )
    assert code(api(http, "act.nope", path, {"publish_id": publish_id})) == (
        401,
        "access_token_invalid",
    )


def test_the_video_list_pages_public_videos_newest_first(
    fake: FakeTikTok, http: httpx.Client
) -> None:
    token = login(fake, http, audited=True)
    open_id = tiktok.open_id_for("maker")
    for age in range(25):
        fake.add_video(open_id, f"video {age} " + "x" * 200, age=age * 60)
    fake.add_video(open_id, "private", privacy_level="SELF_ONLY")

    seen: list[str] = []
    cursor = None
    for expected_more in (True, True, False):
        body = {"max_count": 10} if cursor is None else {"max_count": 10, "cursor": cursor}
        page = video_list(http, token, "id,title,create_time", **body).json()["data"]
        assert page["has_more"] is expected_more
        assert all(set(v) == {"id", "title", "create_time"} for v in page["videos"])
        seen += [v["title"] for v in page["videos"]]
        cursor = page["cursor"]
    assert [t.split(" ")[1] for t in seen] == [str(i) for i in range(25)]
    assert all(len(t) == tiktok.LISTED_TEXT_MAX for t in seen)
    default = video_list(http, token).json()["data"]
    assert len(default["videos"]) == 10  # max_count's default

    assert code(video_list(http, token, max_count=21)) == (400, "invalid_params")
    assert code(video_list(http, token, max_count=0)) == (400, "invalid_params")
    assert code(video_list(http, token, fields="")) == (400, "invalid_params")
    assert code(video_list(http, token, fields="id,nope")) == (400, "invalid_params")


# -- faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fault", "call"),
    [
        ("init_5xx", "init"),
        ("status_5xx", "status"),
        ("list_5xx", "list"),
        ("creator_info_5xx", "creator_info"),
    ],
)
def test_a_5xx_fault_answers_once(
    fake: FakeTikTok, http: httpx.Client, fault: str, call: str
) -> None:
    token, publish_id, _url = started(fake, http)
    calls = {
        "init": lambda: init(http, token),
        "status": lambda: api(
            http, token, "/v2/post/publish/status/fetch/", {"publish_id": publish_id}
        ),
        "list": lambda: video_list(http, token),
        "creator_info": lambda: api(http, token, "/v2/post/publish/creator_info/query/"),
    }
    fake.faults.push(fault, status=503)
    assert code(calls[call]()) == (503, "internal_error")
    assert code(calls[call]()) == (200, "ok")
    assert len(fake.publishes()) == (2 if call == "init" else 1)


def test_a_chunk_5xx_stores_nothing(fake: FakeTikTok, http: httpx.Client) -> None:
    token, publish_id, url = started(fake, http)
    fake.faults.push("chunk_5xx")
    first, data = chunks()[0]
    assert put(http, url, data, first).status_code == 500
    assert status(http, token, publish_id)["uploaded_bytes"] == 0
    assert put(http, url, data, first).status_code == 206


@pytest.mark.parametrize("stored", [True, False])
def test_a_dropped_final_chunk_closes_the_connection(
    fake: FakeTikTok, http: httpx.Client, clock: Clock, stored: bool
) -> None:
    token, publish_id, url = started(fake, http)
    plan = chunks()
    for first, data in plan[:-1]:
        put(http, url, data, first)
    fake.faults.push("drop_final_chunk", stored=stored)
    with pytest.raises(httpx.RemoteProtocolError):
        put(http, url, plan[-1][1], plan[-1][0])
    have = status(http, token, publish_id)["uploaded_bytes"]
    assert have == (len(VIDEO) if stored else plan[-1][0])
    resend = put(http, url, plan[-1][1], plan[-1][0])
    assert resend.status_code == (416 if stored else 201)
    assert resend.headers["Content-Range"] == f"bytes 0-{len(VIDEO)}/{len(VIDEO)}"
    clock.advance(fake.processing_delay)
    assert status(http, token, publish_id)["status"] == "PUBLISH_COMPLETE"
    assert fake.video_bytes(publish_id) == VIDEO


def test_an_expired_publish_fails_and_refuses_its_upload_url(
    fake: FakeTikTok, http: httpx.Client, clock: Clock
) -> None:
    token, publish_id, url = started(fake, http)
    (first, data), (first1, data1) = chunks()[:2]
    assert put(http, url, data, first).status_code == 206
    fake.faults.push("expire_publish")
    assert put(http, url, data1, first1).status_code == 403
    failed = status(http, token, publish_id)
    assert failed["status"] == "FAILED" and failed["fail_reason"] == tiktok.EXPIRED_FAIL_REASON
    assert failed["uploaded_bytes"] == CHUNK

    token2, second, url2 = started(fake, http)
    clock.advance(fake.upload_ttl + 1)  # the upload_url's hour is over
    assert put(http, url2, data, first).status_code == 403
    assert status(http, token2, second)["status"] == "FAILED"


def test_processing_can_fail(fake: FakeTikTok, http: httpx.Client, clock: Clock) -> None:
    token, publish_id, url = started(fake, http)
    fake.faults.push("processing_failed", reason="file_format_check_failed")
    for first, data in chunks():
        put(http, url, data, first)
    clock.advance(fake.processing_delay)
    failed = status(http, token, publish_id)
    assert failed["status"] == "FAILED" and failed["fail_reason"] == "file_format_check_failed"
    assert fake.videos() == []


def test_revocation_faults(fake: FakeTikTok, http: httpx.Client) -> None:
    token = login(fake, http, audited=True)
    open_id = tiktok.open_id_for("maker")
    fake.faults.push("revoked")
    assert code(api(http, token, "/v2/post/publish/creator_info/query/")) == (
        401,
        "access_token_invalid",
    )
    assert refresh(http, fake.refresh_token(open_id)).json()["error"] == "invalid_grant"

    login(fake, http, "other")
    fake.faults.push("invalid_grant")
    assert refresh(http, fake.refresh_token(tiktok.open_id_for("other"))).json()["error"] == (
        "invalid_grant"
    )


def test_faults_and_limits_over_http(fake: FakeTikTok, http: httpx.Client) -> None:
    token = login(fake, http, audited=True)
    queued = http.post("/_fake/faults", json={"fault": "init_5xx"})
    assert queued.status_code == 200 and queued.json()["pending"] == [{"fault": "init_5xx"}]
    assert code(init(http, token)) == (500, "internal_error")
    assert http.post("/_fake/faults", json={"fault": "nope"}).status_code == 400
    # the refused init counted: one more is allowed
    assert http.post("/_fake/limits", json={"init_per_minute": 2}).status_code == 200
    assert code(init(http, token))[0] == 200
    assert code(init(http, token)) == (429, "rate_limit_exceeded")
    added = http.post("/_fake/creators", json={"username": "x", "refresh_token": "rft.x"})
    assert added.json()["open_id"] == tiktok.open_id_for("x")


# -- restarts --------------------------------------------------------------------------------


def test_an_upload_resumes_after_a_restart_from_uploaded_bytes(
    fake: FakeTikTok, http: httpx.Client, clock: Clock
) -> None:
    token, publish_id, url = started(fake, http)
    plan = chunks()
    for first, data in plan[:2]:
        assert put(http, url, data, first).status_code == 206
    fake.restart()
    assert fake.min_chunk == MIN  # the knobs are in the state
    have = status(http, token, publish_id)["uploaded_bytes"]
    assert have == 2 * CHUNK
    for first, data in plan:
        if first >= have:
            assert put(http, url, data, first).status_code in (201, 206)
    clock.advance(fake.processing_delay)
    assert status(http, token, publish_id)["status"] == "PUBLISH_COMPLETE"
    assert fake.video_bytes(publish_id) == VIDEO


def test_videos_posted_in_the_same_millisecond_are_all_listed_at_once(
    fake: FakeTikTok, http: httpx.Client
) -> None:
    """Ties get distinct create times (a cursor never splits one), yet a video is on the
    profile from when it was posted, not from its nudged create time."""
    open_id = fake.add_creator("maker", "rt-maker", audited=True)
    posted = {fake.add_video(open_id, f"post {i}") for i in range(21)}
    assert {v["id"] for v in fake.videos(open_id)} == posted
    token = refresh(http, "rt-maker").json()["access_token"]
    first = video_list(http, token, max_count=20).json()["data"]
    rest = video_list(http, token, max_count=20, cursor=first["cursor"]).json()["data"]
    assert first["has_more"] and not rest["has_more"]
    assert {v["id"] for v in first["videos"] + rest["videos"]} == posted
