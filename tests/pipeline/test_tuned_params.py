"""The day's runs read the dimension's tuned parameter set (slice "adaptive"): videos per day,
the trend volume gate and the hook threshold come from the set in force for the partition's
day, and the YAML's values before it (and after a rollback)."""

from __future__ import annotations

from datetime import date

import dagster as dg

from mdame_assets.defs.topics.assets import topics
from mdame_assets.defs.trends.assets import trends
from mdame_pipeline.locks import held_lock
from mdame_runtime.partition_keys import partition_key

WEEK, FROM = date(2026, 11, 16), date(2026, 11, 23)


def _run(pipeline, day: date) -> dict[str, dict]:
    result = dg.materialize(
        [trends, topics],
        partition_key=str(partition_key(day, "tech")),
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )
    assert result.success, [e.message for e in result.all_events if e.is_failure]
    return {
        node: {
            k: v.value for k, v in result.asset_materializations_for_node(node)[0].metadata.items()
        }
        for node in ("trends", "topics")
    }


def test_the_day_after_a_change_reads_it_and_the_day_before_does_not(pipeline) -> None:
    pipeline.sync()
    params = {"videos_per_day": 2, "trend_volume_gate": 4, "hook_threshold": 0.73}
    with held_lock(pipeline.state, "tech", "adaptive_engine") as engine:
        engine.apply_param_set("tech", WEEK, FROM, params, [], "test")
    before = _run(pipeline, date(2026, 11, 22))
    assert before["trends"]["params_version"] == 0 and before["trends"]["trend_volume_gate"] == 3
    assert before["topics"]["videos_per_day"] == 1 and before["topics"]["approved"] == 1

    after = _run(pipeline, date(2026, 11, 27))
    assert after["trends"]["params_version"] == 1 and after["trends"]["trend_volume_gate"] == 4
    assert after["topics"]["videos_per_day"] == 2 and after["topics"]["approved"] == 2
