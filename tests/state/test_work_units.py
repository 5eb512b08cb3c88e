"""Work units: idempotent creation, natural keys from the payload, checked transitions, events."""

from __future__ import annotations

import threading
from datetime import date

import pytest

from mdame_core.state import (
    Fence,
    IdempotencyConflict,
    InvalidInput,
    NotFound,
    StateConflict,
    StateStore,
)
from tests.adminkit import as_admin

DAY = "2025-06-01"

SCRIPT_PATH = [
    "drafted",
    "approved",
    "planned",
    "visuals_ready",
    "voice_queued",
    "voiced",
    "render_queued",
    "rendered",
    "publishing",
    "published",
]


@pytest.fixture
def held(state: StateStore) -> StateStore:
    """The client as a holder of tech's pipeline lock: work-unit writes are fenced."""
    token = state.acquire_pipeline_lock("pipeline:tech", "test", 600)
    assert token is not None
    return state.fenced(Fence("pipeline:tech", "test", token, 600))


@pytest.fixture
def chain(held: StateStore) -> dict[str, int]:
    """One unit of every kind, linked the way the pipeline links them."""
    ids: dict[str, int] = {}
    ids["dimension"] = dim = as_admin(held).upsert_dimension("tech", "Tech")
    ids["account"] = as_admin(held).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    base = {"dimension_id": dim, "partition_date": DAY}
    ids["trend"] = held.upsert_work_unit("trend", "tr", {**base, "title": "AI chips"})
    ids["topic"] = held.upsert_work_unit("topic", "to", {**base, "trend_id": ids["trend"]})
    ids["script"] = held.upsert_work_unit("script", "sc", {**base, "topic_id": ids["topic"]})
    ids["scene"] = held.upsert_work_unit(
        "scene", "se", {"script_id": ids["script"], "scene_index": 0, "scene_hash": "ab" * 32}
    )
    ids["voice_track"] = held.upsert_work_unit("voice_track", "vo", {"script_id": ids["script"]})
    ids["render"] = held.upsert_work_unit("render", "re", {"script_id": ids["script"]})
    ids["publication"] = held.upsert_work_unit(
        "publication",
        "pu",
        {"script_id": ids["script"], "render_id": ids["render"], "account_id": ids["account"]},
    )
    return ids


def test_upsert_fills_natural_keys_initial_state_and_created_event(held, chain) -> None:
    topic = held.get_work_unit("topic", chain["topic"])
    assert topic.state == "candidate"
    assert topic.refs == {
        "dimension_id": chain["dimension"],
        "partition_date": date(2025, 6, 1),
        "trend_id": chain["trend"],
    }
    assert topic.result == {} and topic.attempts == 0
    scene = held.get_work_unit("scene", "se")
    assert (scene.refs["scene_index"], scene.refs["scene_hash"]) == (0, "ab" * 32)
    pub = held.get_work_unit("publication", "pu")
    assert pub.refs == {
        "script_id": chain["script"],
        "render_id": chain["render"],
        "account_id": chain["account"],
        "content_sha256": None,
    }
    initial = {
        "trend": "scored",
        "topic": "candidate",
        "script": "drafted",
        "scene": "planned",
        "voice_track": "ready",
        "render": "rendered",
        "publication": "pending",
    }
    for kind, expected in initial.items():
        unit = held.get_work_unit(kind, chain[kind])
        assert unit.state == expected
        events = held.list_events(kind, unit.id)
        assert [(e.event, e.to_state) for e in events] == [("created", expected)]


def test_same_key_same_payload_is_the_same_row_other_payload_raises(held, chain) -> None:
    payload = {"partition_date": DAY, "title": "AI chips", "dimension_id": chain["dimension"]}
    assert held.upsert_work_unit("trend", "tr", payload) == chain["trend"]
    assert len(held.list_events("trend", chain["trend"])) == 1  # no second 'created'
    with pytest.raises(IdempotencyConflict, match="different payload"):
        held.upsert_work_unit("trend", "tr", {**payload, "title": "AI chips!"})
    assert len(held.list_work_units("trend")) == 1


def test_concurrent_upserts_of_one_key_converge(held, chain) -> None:
    payload = {"dimension_id": chain["dimension"], "partition_date": DAY, "n": 7}
    ids: list[int] = []
    barrier = threading.Barrier(4)

    def upsert() -> None:
        barrier.wait()
        ids.append(held.upsert_work_unit("topic", "race", payload))

    threads = [threading.Thread(target=upsert) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(ids)) == 1 and len(ids) == 4
    assert len(held.list_events("topic", ids[0])) == 1


def test_payload_problems_raise_clear_errors(held, chain) -> None:
    with pytest.raises(InvalidInput, match="lacks required key partition_date"):
        held.upsert_work_unit("topic", "t2", {"dimension_id": chain["dimension"]})
    with pytest.raises(NotFound, match="dimension 999 does not exist"):
        held.upsert_work_unit("topic", "t3", {"dimension_id": 999, "partition_date": DAY})
    with pytest.raises(InvalidInput, match="non-integer dimension_id"):
        held.upsert_work_unit("topic", "t4", {"dimension_id": "x", "partition_date": DAY})
    with pytest.raises(InvalidInput, match="unknown kind 'topics'"):
        held.upsert_work_unit("topics", "t5", {})
    with pytest.raises(InvalidInput, match="256 KiB"):
        held.upsert_work_unit(
            "trend",
            "big",
            {
                "dimension_id": chain["dimension"],
                "partition_date": DAY,
                "blob": "x" * 262_144,
            },
        )
    with pytest.raises(IdempotencyConflict, match="natural keys"):  # scene 0 exists already
        held.upsert_work_unit(
            "scene", "se-dup", {"script_id": chain["script"], "scene_index": 0, "scene_hash": "c"}
        )


def test_script_walks_its_whole_path_with_an_event_per_step(held, chain) -> None:
    script = chain["script"]
    for step, (src, dst) in enumerate(zip(SCRIPT_PATH, SCRIPT_PATH[1:], strict=False)):
        held.transition("script", script, src, dst, {f"step{step}": dst})
    unit = held.get_work_unit("script", script)
    assert unit.state == "published"
    assert unit.result == {f"step{i}": s for i, s in enumerate(SCRIPT_PATH[1:])}
    events = held.list_events("script", script)
    assert [(e.from_state, e.to_state) for e in events[1:]] == list(
        zip(SCRIPT_PATH, SCRIPT_PATH[1:], strict=False)
    )
    assert events[-1].detail == {"step8": "published"}
    with pytest.raises(StateConflict, match="illegal transition for script: published -> failed"):
        held.transition("script", script, "published", "failed")


def test_transition_checks(held, chain) -> None:
    topic = chain["topic"]
    with pytest.raises(StateConflict, match="is in state candidate, not approved"):
        held.transition("topic", topic, "approved", "scripted")
    with pytest.raises(StateConflict, match="illegal transition for topic: candidate -> scripted"):
        held.transition("topic", topic, "candidate", "scripted")
    with pytest.raises(InvalidInput, match="not a transition"):
        held.transition("topic", topic, "candidate", "candidate")
    with pytest.raises(NotFound):
        held.transition("topic", 999_999, "candidate", "approved")
    held.transition("topic", topic, "candidate", "approved", {"hook_score": 0.81})
    held.transition("topic", topic, "approved", "scripted", {"script_id": chain["script"]})
    unit = held.get_work_unit("topic", topic)
    assert unit.result == {"hook_score": 0.81, "script_id": chain["script"]}
    assert len(held.list_events("topic", topic)) == 3  # created + 2 transitions; none for errors


def test_other_kinds_follow_their_tables(held, chain) -> None:
    held.transition("scene", chain["scene"], "planned", "ready", {"cache": "hit"})
    held.transition("render", chain["render"], "rendered", "approved")
    pub = chain["publication"]
    held.transition("publication", pub, "pending", "uploading")
    held.transition("publication", pub, "uploading", "pending", {"reconciled": "not uploaded"})
    held.transition("publication", pub, "pending", "uploading")
    held.transition("publication", pub, "uploading", "published", {"video_id": "v1"})
    # A ready voice track may fail (its file vanished: 0007's healing); failed is final.
    held.transition("voice_track", chain["voice_track"], "ready", "failed", {"reason": "gone"})
    with pytest.raises(StateConflict):
        held.transition("voice_track", chain["voice_track"], "failed", "ready")
    with pytest.raises(StateConflict):
        held.transition("trend", chain["trend"], "scored", "failed")


def test_any_non_terminal_state_may_fail_and_failed_is_final(held, chain) -> None:
    script = chain["script"]
    held.transition("script", script, "drafted", "approved")
    held.transition("script", script, "approved", "failed", {"error": "writer crashed"})
    with pytest.raises(StateConflict):
        held.transition("script", script, "failed", "approved")


def test_allowed_transitions_table_matches_the_design(owner) -> None:
    rows = owner.execute(
        "SELECT from_state, to_state FROM mdame.allowed_transitions WHERE kind = 'script'"
    ).fetchall()
    expected = set(zip(SCRIPT_PATH, SCRIPT_PATH[1:], strict=False)) | {
        ("drafted", "rejected"),
        # The visuals chain: a scene no engine could picture past the gate rejects its script.
        ("planned", "rejected"),
        ("voice_queued", "halted"),
        # Healing (0006): a script whose clips vanished goes back to planned until it is voiced.
        *((s, "planned") for s in ("visuals_ready", "voice_queued", "voiced", "render_queued")),
        # Healing (0007): a damaged voice track or render is made again.
        ("voiced", "visuals_ready"),
        ("render_queued", "visuals_ready"),
        ("rendered", "voiced"),
        ("publishing", "voiced"),
        # Voice HALT with a backoff retry (0009): halted waits for its retry, or fails.
        ("halted", "voice_queued"),
        ("halted", "failed"),
    }
    expected |= {(s, "failed") for s in SCRIPT_PATH[:-1]}
    assert set(rows) == expected
    (bad,) = owner.execute(
        """SELECT count(*) FROM mdame.allowed_transitions t
             JOIN mdame.work_states s ON (s.kind, s.state) = (t.kind, t.from_state)
            WHERE s.is_terminal"""
    ).fetchone()
    assert bad == 0, "nothing leaves a terminal state"


def test_the_stage_order_is_derived_from_the_transitions(state, owner) -> None:
    assert state.work_flow("script", "published") == tuple(SCRIPT_PATH)
    assert state.work_flow("publication", "published") == ("pending", "uploading", "published")
    with pytest.raises(ValueError, match="unknown kind 'nope'"):
        state.work_flow("nope", "published")
    with pytest.raises(ValueError, match="no transitions lead from 'drafted' to 'nowhere'"):
        state.work_flow("script", "nowhere")
    # A shortcut in the database is the stages' order at once: nothing else to edit.
    owner.execute(
        "INSERT INTO mdame.allowed_transitions VALUES ('script', 'approved', 'visuals_ready')"
    )
    shortcut = StateStore(state.url, env="dev", pool_max=1)
    ambiguous = StateStore(state.url, env="dev", pool_max=1)
    try:
        assert "planned" not in shortcut.work_flow("script", "published")
        owner.execute(
            "INSERT INTO mdame.allowed_transitions VALUES ('script', 'drafted', 'planned')"
        )
        with pytest.raises(ValueError, match="the stage order is ambiguous"):
            ambiguous.work_flow("script", "published")
    finally:
        shortcut.close()
        ambiguous.close()


def test_bump_attempt_counts_retries_without_moving(held, chain) -> None:
    topic = chain["topic"]
    assert held.bump_work_attempt("topic", topic, {"hook_score": 0.5}) == 1
    assert held.bump_work_attempt("topic", topic, {"hook_score": 0.6}) == 2
    unit = held.get_work_unit("topic", topic)
    assert (unit.state, unit.attempts, unit.result) == ("candidate", 2, {"hook_score": 0.6})
    held.transition("topic", topic, "candidate", "rejected")
    with pytest.raises(StateConflict, match="terminal"):
        held.bump_work_attempt("topic", topic)


def test_list_work_units_filters(held, chain) -> None:
    dim = chain["dimension"]
    for i in range(3):
        held.upsert_work_unit("topic", f"extra{i}", {"dimension_id": dim, "partition_date": DAY})
    held.transition("topic", chain["topic"], "candidate", "approved")
    assert len(held.list_work_units("topic", dimension_id=dim, state="candidate")) == 3
    assert [u.id for u in held.list_work_units("topic", state="approved")] == [chain["topic"]]
    assert len(held.list_work_units("topic", partition_date=date(2025, 6, 1), limit=2)) == 2
    assert held.get_work_unit("topic", "nope") is None
    with pytest.raises(ValueError, match="cannot filter"):
        held.list_work_units("topic", payload={})


def test_partitions_with_scripts_in(held, chain) -> None:
    assert held.partitions_with_scripts_in(["planned"]) == []
    held.transition("script", chain["script"], "drafted", "approved")
    held.transition("script", chain["script"], "approved", "planned")
    (work,) = held.partitions_with_scripts_in(["planned", "visuals_ready"])
    assert (work.dimension_slug, work.partition_date, work.scripts) == ("tech", date(2025, 6, 1), 1)
    assert work.last_update == held.get_work_unit("script", chain["script"]).updated_at


# -- accounts and publications (0003) -----------------------------------------------------
ALLOW = {"verdict": "allow", "rule": "ok", "reasons": [], "classifier": "rules"}
BLOCK = {"verdict": "block", "rule": "no", "reasons": [], "classifier": "rules"}


@pytest.fixture
def tech(state: StateStore) -> tuple[StateStore, dict[str, int]]:
    """A fenced view holding tech's pipeline lock, a dimension and a youtube account."""
    token = state.acquire_pipeline_lock("pipeline:tech", "test", 600)
    held = state.fenced(Fence("pipeline:tech", "test", token, 600))
    ids = {"dimension": as_admin(state).upsert_dimension("tech", "Tech")}
    ids["account"] = as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 10_000)
    return held, ids


def _script_and_render(held: StateStore, dim: int, key: str) -> dict[str, int]:
    base = {"dimension_id": dim, "partition_date": "2025-06-02"}
    [trend] = held.record_trends("tech", [{"key": f"{key}-tr", "payload": {**base, "title": key}}])
    topic = held.decide_topic(f"{key}-to", {**base, "trend_id": trend}, ALLOW)
    script = held.record_script(f"{key}-sc", {**base, "topic_id": topic}, ALLOW)
    render = held.upsert_work_unit("render", f"{key}-re", {"script_id": script})
    return {"script_id": script, "render_id": render}


def test_registry_deactivation_touches_only_the_dimensions_accounts(state, tech) -> None:
    as_admin(state).upsert_dimension("news", "News")
    other = as_admin(state).upsert_dimension_account("news", "youtube", "@news", 10)
    kept = as_admin(state).upsert_dimension_account("tech", "tiktok", "@tech", 10)
    assert as_admin(state).set_dimension_accounts_active("tech", [("tiktok", "@tech")]) == 1
    accounts = {(a.platform, a.handle): a.active for a in state.list_accounts("tech")}
    assert accounts == {("youtube", "@tech"): False, ("tiktok", "@tech"): True}
    assert [a.id for a in state.list_accounts("tech", active_only=True)] == [kept]
    assert state.list_accounts("news")[0].active and state.list_accounts("news")[0].id == other
    assert as_admin(state).set_dimension_accounts_active("tech", [("tiktok", "@tech")]) == 0
    with pytest.raises(NotFound, match="has no account"):
        as_admin(state).set_dimension_accounts_active("tech", [("youtube", "@news")])  # not tech's
    assert state.list_accounts("news")[0].active
    as_admin(state).upsert_dimension_account("tech", "youtube", "@tech", 10_000)  # back in the YAML
    assert all(a.active for a in state.list_accounts("tech"))


def test_no_publication_for_an_inactive_account(state, tech) -> None:
    held, ids = tech
    refs = _script_and_render(held, ids["dimension"], "a")
    payload = {**refs, "account_id": ids["account"], "content_sha256": "e" * 64}
    existing = held.upsert_work_unit("publication", "pu-1", payload)
    as_admin(state).upsert_dimension_account("tech", "tiktok", "@tech", 10)
    as_admin(state).set_dimension_accounts_active(
        "tech", [("tiktok", "@tech")]
    )  # @tech on youtube: off
    refs = _script_and_render(held, ids["dimension"], "b")
    with pytest.raises(StateConflict, match=r"account \d+ \(youtube/'@tech'\) is inactive") as err:
        held.upsert_work_unit("publication", "pu-2", {**refs, "account_id": ids["account"]})
    assert err.value.sqlstate == "MD003"  # upsert_work_unit lets the trigger's error through
    assert state.get_work_unit("publication", "pu-2") is None
    # The existing publication stays, and retrying its creation still returns it.
    assert held.upsert_work_unit("publication", "pu-1", payload) == existing


def test_the_same_bytes_are_published_once_per_account(state, tech) -> None:
    held, ids = tech
    sha = "d" * 64
    first = _script_and_render(held, ids["dimension"], "b")
    second = _script_and_render(held, ids["dimension"], "c")
    account = ids["account"]
    held.upsert_work_unit(
        "publication", "pu-b", {**first, "account_id": account, "content_sha256": sha}
    )
    with pytest.raises(IdempotencyConflict, match="publications_same_bytes_once_per_account"):
        held.upsert_work_unit(
            "publication", "pu-c", {**second, "account_id": account, "content_sha256": sha}
        )
    assert state.get_work_unit("publication", "pu-c") is None
    other = as_admin(state).upsert_dimension_account("tech", "tiktok", "@mirror", 10)
    assert held.upsert_work_unit(
        "publication", "pu-c", {**second, "account_id": other, "content_sha256": sha}
    )


def test_covered_topic_titles_are_the_other_days_in_the_window(state, tech) -> None:
    held, ids = tech
    dim = ids["dimension"]

    def topic(key: str, day: str, title: str, decision: dict | None) -> None:
        base = {"dimension_id": dim, "partition_date": day}
        [trend] = held.record_trends("tech", [{"key": f"{key}-tr", "payload": {**base}}])
        payload = {**base, "trend_id": trend, "title": title}
        if decision is None:
            held.upsert_work_unit("topic", key, payload)
        else:
            held.decide_topic(key, payload, decision)

    topic("old", "2025-05-01", "Too old", ALLOW)
    topic("before", "2025-06-01", "Day before", ALLOW)
    topic("same", "2025-06-02", "Same day", ALLOW)
    topic("after", "2025-06-03", "Day after", ALLOW)
    topic("rejected", "2025-06-01", "Rejected", BLOCK)
    topic("candidate", "2025-06-01", "Undecided", None)
    titles = state.covered_topic_titles(dim, date(2025, 6, 2), 14)
    assert titles == ["Day before", "Day after"]
    assert state.covered_topic_titles(dim, date(2025, 6, 2), 0) == []
