"""0016: video statistics per publication and day, and the weekly reports (issue 12)."""

from __future__ import annotations

from datetime import date

import pytest
from psycopg.types.json import Jsonb
from test_fencing import hold
from test_phases import _begin, _to_publishing

from mdame_core.state import InvalidInput, NotFound, StateConflict, StateStore
from tests.adminkit import as_admin

DAY = date(2026, 11, 29)
MONDAY = date(2026, 11, 23)
SHA = "f" * 64


def _published(state: StateStore) -> dict:
    a = hold(state, "tech")
    ids = _to_publishing(a)
    start = _begin(a, ids)
    assert a.finish_upload(start.attempt_id, "succeeded", "vid-1") == "published"
    ids["pub"] = start.publication_id
    ids["held"] = a  # the analytics step writes the counters under the dimension's lock
    return ids


def _stat(pub: int, views: int) -> dict:
    return {"publication_id": pub, "views": views, "likes": views // 10, "comments": 1}


def test_a_day_of_stats_is_upserted_idempotently(state, owner) -> None:
    ids = _published(state)
    pub, state = ids["pub"], ids["held"]
    assert state.record_video_stats(DAY, [_stat(pub, 100)]) == 1
    assert state.record_video_stats(DAY, [_stat(pub, 100)]) == 1  # a retry: same row
    assert state.record_video_stats(DAY, [_stat(pub, 150)]) == 1  # a fresher read replaces
    assert state.record_video_stats(date(2026, 11, 30), [_stat(pub, 300)]) == 1
    stats = state.video_stats(ids["dim"], DAY, date(2026, 11, 30))
    assert [(s.day, s.views, s.likes, s.video_id) for s in stats] == [
        (DAY, 150, 15, "vid-1"),
        (date(2026, 11, 30), 300, 30, "vid-1"),
    ]
    assert owner.execute("SELECT count(*) FROM mdame.video_stats").fetchone() == (2,)
    assert state.record_video_stats(DAY, []) == 0
    [video] = state.published_videos(ids["dim"], DAY)
    assert (video.publication_id, video.video_id, video.platform) == (pub, "vid-1", "youtube")


def test_bad_stats_are_refused_whole_batch(state, owner) -> None:
    ids = _published(state)
    pub, state = ids["pub"], ids["held"]
    bad = [
        ([{"publication_id": pub, "views": -1, "likes": 0, "comments": 0}], "views"),
        ([{"publication_id": pub, "views": 1.5, "likes": 0, "comments": 0}], "views"),
        ([{"publication_id": pub, "views": "7", "likes": 0, "comments": 0}], "views"),
        ([{"publication_id": pub, "views": 1, "comments": 0}], "likes"),
        ([[pub, 1, 1, 1]], r"items\[0\] must be a JSON object"),
        ([_stat(pub, 1)] * 1001, "over the limit of 1000"),
    ]
    for items, needle in bad:
        with pytest.raises(InvalidInput, match=needle):
            state.record_video_stats(DAY, items)
    with pytest.raises(InvalidInput, match="day must not be NULL"):
        state.record_video_stats(None, [_stat(pub, 1)])  # type: ignore[arg-type]
    with pytest.raises(InvalidInput, match="plausible"):
        state.record_video_stats(date(2999, 1, 1), [_stat(pub, 1)])
    with pytest.raises(InvalidInput, match="items must be a JSON array"):
        state.call("record_video_stats", DAY, Jsonb({}), state._token())
    # One bad item refuses the batch: the good one before it is not written either.
    with pytest.raises(NotFound, match="publication 999999 does not exist"):
        state.record_video_stats(DAY, [_stat(pub, 5), _stat(999_999, 5)])
    assert owner.execute("SELECT count(*) FROM mdame.video_stats").fetchone() == (0,)


def test_stats_need_a_published_video(state) -> None:
    a = hold(state, "tech")
    ids = _to_publishing(a)
    start = _begin(a, ids)  # uploading: no video id yet
    with pytest.raises(StateConflict, match="not published"):
        a.record_video_stats(DAY, [_stat(start.publication_id, 1)])


def test_a_rerun_replaces_the_weeks_report(state, owner) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    state = hold(state, "tech")  # the Auditor's step stores it under the dimension's lock
    image = {"name": "views.png", "uri": f"media://{SHA}.png", "sha256": SHA}
    first = state.store_report("tech", MONDAY, {"videos_published": 1}, "# week", [image])
    again = state.store_report("tech", MONDAY, {"videos_published": 2}, "# week 2", [])
    assert again == first
    report = state.get_report("tech", MONDAY)
    assert report is not None
    assert (report.metrics, report.markdown, report.images, report.revision) == (
        {"videos_published": 2},
        "# week 2",
        [],
        2,
    )
    assert state.get_report("tech", date(2026, 11, 30)) is None
    assert owner.execute("SELECT count(*) FROM mdame.reports").fetchone() == (1,)
    events = owner.execute(
        "SELECT detail ->> 'revision' FROM mdame.events WHERE event = 'report_stored' ORDER BY id"
    ).fetchall()
    assert events == [("1",), ("2",)]


def test_bad_reports_are_refused(state, owner) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    state = hold(state, "tech")
    good = {"name": "v.png", "uri": "media://x", "sha256": SHA}
    cases = [
        (("tech", date(2026, 11, 24), {}, "# r", []), InvalidInput, "not a Monday"),
        (("tech", None, {}, "# r", []), InvalidInput, "week_start must not be NULL"),
        (("tech", MONDAY, {}, "", []), InvalidInput, "markdown must not be NULL or empty"),
        (("tech", MONDAY, {}, "x" * 200_001, []), InvalidInput, "markdown is longer"),
        (("tech", MONDAY, {}, "# r", [{**good, "sha256": "nope"}]), InvalidInput, "sha256"),
        (("tech", MONDAY, {}, "# r", [{**good, "name": "../x"}]), InvalidInput, "name"),
        (("tech", MONDAY, {}, "# r", [{**good, "uri": ""}]), InvalidInput, "uri"),
        (("tech", MONDAY, {}, "# r", [good] * 21), InvalidInput, "limit of 20"),
        (("nope", MONDAY, {}, "# r", []), NotFound, "unknown dimension"),
    ]
    for args, error, needle in cases:
        with pytest.raises(error, match=needle):
            state.store_report(*args)
    with pytest.raises(InvalidInput, match="metrics must be a JSON object"):
        state.call("store_report", "tech", MONDAY, Jsonb([]), "# r", Jsonb([]), state._token())
    assert owner.execute("SELECT count(*) FROM mdame.reports").fetchone() == (0,)
