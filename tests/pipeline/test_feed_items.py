"""A feed item whose text PostgreSQL cannot store is skipped and logged, not fatal to trends."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import dagster as dg

from mdame_assets.defs.trends.assets import trends
from mdame_core.settings import REPO_ROOT
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR
from mdame_runtime.partition_keys import partition_key

DAY = date(2026, 11, 29)
BAD_ITEM = (
    "<item><title>Robot vacuum &#0; maps homes with AI</title>"
    "<link>https://example.com/nul</link><guid>nul-item</guid>"
    "<description>A chip and battery story with a NUL\x00inside.</description></item>"
)


def test_a_nul_feed_item_is_skipped_and_counted(pipeline, tmp_path: Path) -> None:
    feed = tmp_path / "tech-with-nul.xml"
    feed.write_text(
        (REPO_ROOT / "feeds" / "tech.xml").read_text().replace("<item>", BAD_ITEM + "<item>", 1)
    )
    folder = tmp_path / "dimensions"
    folder.mkdir()
    (folder / "tech.yaml").write_text(
        (DIMENSIONS_DIR / "tech.yaml")
        .read_text()
        .replace("feeds: [feeds/tech.xml]", f"feeds: ['{feed}']")
    )
    pipeline.sync(folder)

    result = dg.materialize(
        [trends],
        partition_key=str(partition_key(DAY, "tech")),
        instance=pipeline.instance,
        resources=pipeline.resources,
        raise_on_error=False,
    )

    assert result.success, [e.message for e in result.all_events if e.is_failure]
    [materialization] = result.asset_materializations_for_node("trends")
    metadata = {k: v.value for k, v in materialization.metadata.items()}
    assert metadata["skipped_items"] == 1
    assert metadata["kept"] > 0
    titles = [t.payload["title"] for t in pipeline.state.list_work_units("trend")]
    assert titles and not any("Robot vacuum" in t for t in titles)
