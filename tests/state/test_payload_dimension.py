"""The dimension of new work comes from the rows its payload names, never from the caller's
word: a holder of one dimension's lock cannot attach its work to another dimension's rows, and
a publication cannot pair a script with another script's render or another dimension's
account."""

from __future__ import annotations

from typing import Any

import pytest

from mdame_core.state import Fenced, InvalidInput, StateStore
from tests.adminkit import as_admin
from tests.state.test_fencing import hold

DAY = "2026-11-29"
SHA = "e" * 64
DECISION = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}


def _script(held: StateStore, slug: str, key: str) -> dict[str, Any]:
    """A trend, topic, script and render of `slug`, written under its own lock."""
    ids: dict[str, Any] = {"dim": held.get_dimension(slug).id}  # type: ignore[union-attr]
    base = {"dimension_id": ids["dim"], "partition_date": DAY}
    [ids["trend"]] = held.record_trends(
        slug, [{"key": f"{key}-tr", "payload": {**base, "title": "AI chips"}}]
    )
    ids["topic"] = held.decide_topic(f"{key}-to", {**base, "trend_id": ids["trend"]}, DECISION)
    ids["script"] = held.record_script(f"{key}-sc", {**base, "topic_id": ids["topic"]}, DECISION)
    ids["render"] = held.upsert_work_unit("render", f"{key}-re", {"script_id": ids["script"]})
    return ids


@pytest.fixture
def two(state: StateStore) -> dict[str, Any]:
    admin = as_admin(state)
    for slug in ("tech", "news"):
        admin.upsert_dimension(slug, slug.title())
        admin.upsert_dimension_account(slug, "youtube", f"@{slug}", 10_000)
    tech, news = hold(state, "tech"), hold(state, "news")
    return {
        "tech": tech,
        "news": news,
        "t": _script(tech, "tech", "t"),
        "t2": _script(tech, "tech", "t2"),
        "n": _script(news, "news", "n"),
        "tech_account": admin.list_accounts("tech")[0].id,
        "news_account": admin.list_accounts("news")[0].id,
    }


def test_work_naming_its_own_dimension_on_another_dimensions_rows_is_refused(two, owner) -> None:
    tech, t, n = two["tech"], two["t"], two["n"]
    scripts = owner.execute("SELECT count(*) FROM mdame.scripts").fetchone()
    with pytest.raises(
        InvalidInput, match=r"mixes dimensions: topic_id \d+ is of dimension \d+, dimension_id"
    ):
        tech.record_script(
            "stolen-topic",
            {"dimension_id": t["dim"], "partition_date": DAY, "topic_id": n["topic"]},
            DECISION,
        )
    with pytest.raises(InvalidInput, match=r"mixes dimensions: trend_id"):
        tech.decide_topic(
            "stolen-trend",
            {"dimension_id": t["dim"], "partition_date": DAY, "trend_id": n["trend"]},
            DECISION,
        )
    with pytest.raises(Fenced):  # the script's dimension is news: tech's lock does not hold it
        tech.upsert_work_unit("voice_track", "stolen-voice", {"script_id": n["script"]})
    assert owner.execute("SELECT count(*) FROM mdame.scripts").fetchone() == scripts


def test_a_publication_pairs_a_script_with_its_own_render_and_dimensions_account(two) -> None:
    tech, t, t2 = two["tech"], two["t"], two["t2"]
    other_render = {
        "script_id": t["script"],
        "render_id": t2["render"],
        "account_id": two["tech_account"],
        "content_sha256": SHA,
    }
    with pytest.raises(InvalidInput, match=f"render {t2['render']} is a render of script"):
        tech.upsert_work_unit("publication", "wrong-render", other_render)
    other_account = {**other_render, "render_id": t["render"], "account_id": two["news_account"]}
    with pytest.raises(
        InvalidInput, match=r"mixes dimensions: script_id \d+ is of dimension \d+, account_id"
    ):
        tech.upsert_work_unit("publication", "wrong-account", other_account)
    own = {**other_account, "account_id": two["tech_account"]}
    assert tech.upsert_work_unit("publication", "right", own) > 0
