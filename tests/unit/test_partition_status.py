"""The status table's rules without a database: the command that fixes each alert, the stage
reached, and a Markdown table whose cells cannot break it."""

from __future__ import annotations

import re
from collections import Counter
from datetime import UTC, date, datetime

import pytest

from mdame_domain.partition_status import (
    JobRun,
    OpenAlert,
    PartitionStatus,
    Wait,
    fix_command,
    ran_ok,
    stage_reached,
    status_markdown,
    status_rows,
)
from mdame_domain.publish_summary import PartitionFacts

DAY = date(2026, 11, 29)
FLOW = ("drafted", "planned", "visuals_ready", "voiced", "rendered", "publishing", "published")


@pytest.mark.parametrize(
    ("cause", "text", "fix"),
    [
        (
            "reauth_needed",
            "h\naccount tech-yt: 401; run `mdame accounts connect tech --account tech-yt` once",
            "mdame accounts connect tech --account tech-yt",
        ),
        (
            "reauth_needed",
            "h\naccount tech-yt: no grant",
            "mdame accounts connect tech --account tech-yt",
        ),
        (
            "provider_refused",
            "h\nGemini call k (m) refused: 404; fix: set gemini_tts_model in dimensions/tech.yaml",
            "set gemini_tts_model in dimensions/tech.yaml, then "
            "mdame calls retry --dimension tech --day 2026-11-29",
        ),
        (
            "quota_exhausted",
            "h\nno insert quota left",
            "none: publishing resumes once the quota resets (see waits)",
        ),
        (
            "halt",
            "h\nvoice failed (voice retried from ...)",
            "none: the voice is retried on its own (see waits)",
        ),
        ("disk_low", "h\n2 GB free", "mdame doctor --only disk (then free space under MDAME_HOME)"),
        (
            "run_failure",
            "h\nrun abc failed",
            "mdame backfill --dimension tech --from 2026-11-29 (once the cause is fixed)",
        ),
    ],
)
def test_each_alert_gets_one_fix(cause: str, text: str, fix: str) -> None:
    assert fix_command(OpenAlert(cause, DAY, text), "tech", DAY) == fix


def test_the_stage_is_the_furthest_script_state_else_topics_else_trends() -> None:
    base = PartitionFacts("2026-11-29|tech", "tech", True, trends=4)
    assert stage_reached(base, FLOW) == "trends (4), no topic yet"
    topics = PartitionFacts(
        "2026-11-29|tech", "tech", True, rejected_topics=("hook",), topics_open=1
    )
    assert stage_reached(topics, FLOW) == "topics (1 rejected, 1 undecided)"
    scripts = PartitionFacts(
        "2026-11-29|tech", "tech", True, scripts=Counter(rejected=1, voiced=1, planned=1)
    )
    assert stage_reached(scripts, FLOW) == "scripts voiced (1 planned, 1 rejected, 1 voiced)"


def test_a_failed_run_decides_the_verdict_and_cells_cannot_break_the_table() -> None:
    runs = (
        JobRun("content_job", "SUCCESS", "a" * 36, datetime(2026, 11, 29, 6, tzinfo=UTC)),
        JobRun("publishing_job", "FAILURE", "b" * 36, None, "publications: boom | bang"),
    )
    ok, error = ran_ok(runs)
    facts = PartitionFacts("2026-11-29|tech", "tech", ok, error)
    status = PartitionStatus(
        facts,
        "scripts publishing (1 publishing)",
        runs,
        (Wait("an interrupted upload", datetime(2026, 11, 29, 7, 1, 2, tzinfo=UTC)),),
    )
    rows = dict(status_rows(status))
    assert rows["published"] == "no: a stage failed: publishing_job: publications: boom | bang"
    assert rows["last content_job"] == "success 2026-11-29 06:00:00 UTC, run aaaaaaaa"
    assert rows["waits"] == "an interrupted upload until 2026-11-29 07:01:02 UTC"
    table = status_markdown(status)
    assert "boom \\| bang |" in table
    # Every row splits into exactly two cells on its unescaped pipes.
    assert all(len(re.split(r"(?<!\\)\|", line)) == 4 for line in table.splitlines()[2:])


def test_a_partition_no_run_has_looked_at_is_not_said_to_have_no_trends() -> None:
    facts = PartitionFacts("2026-11-29|tech", "tech", True)
    rows = dict(status_rows(PartitionStatus(facts, stage_reached(facts, FLOW))))
    assert rows["published"] == "no: the partition has not run yet"
    assert rows["runs"] == "none recorded for this partition"


def test_a_tiktok_account_named_by_an_alert_without_a_command_gets_its_own_flow() -> None:
    alert = OpenAlert("reauth_needed", DAY, "h\naccount tech-tt: refused")
    fix = fix_command(alert, "tech", DAY, {"tech-tt": "tiktok"})
    assert fix == "mdame accounts connect tech --platform tiktok --account tech-tt"
