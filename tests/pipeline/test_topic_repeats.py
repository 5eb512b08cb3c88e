"""Topics covered in the dimension's lookback window are not picked again: the sample feeds
repeat every day, as a big story trends for days, and a backfill used to publish the same
video once per day."""

from __future__ import annotations

from datetime import date, timedelta

import dagster as dg

from mdame_assets.defs.topics.assets import topics
from mdame_assets.defs.trends.assets import trends
from mdame_domain.topics import same_story
from mdame_runtime.partition_keys import partition_key

DAY = date(2026, 11, 27)


def _materialize(pipeline, day: date) -> dg.ExecuteInProcessResult:
    return dg.materialize(
        [trends, topics],
        partition_key=str(partition_key(day, "tech")),
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )


def _approved_titles(pipeline) -> dict[date, list[str]]:
    by_day: dict[date, list[str]] = {}
    for topic in pipeline.state.list_work_units("topic"):
        if topic.state == "approved":
            by_day.setdefault(topic.refs["partition_date"], []).append(topic.payload["title"])
    return by_day


def _metadata(result: dg.ExecuteInProcessResult) -> dict:
    [materialization] = result.asset_materializations_for_node("topics")
    return {k: v.value for k, v in materialization.metadata.items()}


def test_two_consecutive_days_do_not_repeat_a_topic(pipeline) -> None:
    pipeline.sync()
    first = _materialize(pipeline, DAY)
    assert first.success, [e.message for e in first.all_events if e.is_failure]
    assert _metadata(first)["skipped_repeats"] == []

    second = _materialize(pipeline, DAY + timedelta(days=1))

    assert second.success, [e.message for e in second.all_events if e.is_failure]
    titles = _approved_titles(pipeline)
    [day_one], [day_two] = titles[DAY], titles[DAY + timedelta(days=1)]
    assert not same_story(day_one, day_two), (day_one, day_two)
    skipped = _metadata(second)["skipped_repeats"]
    assert skipped and all(same_story(title, day_one) for title in skipped)
    assert _metadata(second)["approved"] == 1  # the slot went to the next trend
    rules = pipeline.state._select(
        "SELECT DISTINCT rule FROM mdame.safety_audit_logs WHERE verdict = 'block'"
    )
    assert ("repeat",) in rules  # the audit trail says why

    # A rerun of either day is a no-op: the same topics, the same decisions.
    before = [(t.id, t.state) for t in pipeline.state.list_work_units("topic")]
    assert _materialize(pipeline, DAY).success
    assert _materialize(pipeline, DAY + timedelta(days=1)).success
    assert [(t.id, t.state) for t in pipeline.state.list_work_units("topic")] == before

    # A backfill running an earlier day last still avoids both.
    earlier = _materialize(pipeline, DAY - timedelta(days=1))
    assert earlier.success
    [day_zero] = _approved_titles(pipeline)[DAY - timedelta(days=1)]
    assert not same_story(day_zero, day_one) and not same_story(day_zero, day_two)
