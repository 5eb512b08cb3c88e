"""Why a partition published nothing, from its facts: each cause is named, and only the
dimension's own rejections count as nothing to fix (the demo's exit status follows)."""

from __future__ import annotations

from collections import Counter

import pytest

from mdame_cli.demo import summary
from mdame_domain.publish_summary import PartitionFacts, unpublished_reason

KEY = "2026-11-29|tech"


def facts(**fields) -> PartitionFacts:
    return PartitionFacts(**{"partition_key": KEY, "dimension": "tech", "ran_ok": True,
                             "trends": 6, "accounts": 1, **fields})  # fmt: skip


def test_every_topic_rejected_is_nothing_to_fix_and_says_by_what() -> None:
    verdict = unpublished_reason(
        facts(
            rejected_topics=("blocked_term", "blocked_term", "hook", "repeat"),
            rejected_scripts=("prompt_firewall",),
            scripts=Counter(rejected=1),
        )
    )
    assert verdict.expected
    assert verdict.reason == (
        "every topic was rejected: 3 by safety (blocked_term x2, prompt_firewall); "
        "1 by hook score (every hook under the threshold); "
        "1 as repeats of a story covered on a nearby day"
    )


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"ran_ok": False, "run_error": "renders: ffmpeg died"}, "a stage failed: renders: ffmpeg"),
        ({"registered": False}, "not registered"),
        ({"budget_exhausted": True, "topics_open": 2}, "daily budget cap (daily_budget_usd)"),
        (
            {"voice_halts": ("edge: 403 (no retry left)",), "ran_ok": False, "run_error": "x"},
            "voice HALT on 1 script(s), every voice provider failed: edge: 403 (no retry left)",
        ),
        (
            {"blocked_accounts": ("@tech (needs reauth)",), "scripts": Counter(publishing=1)},
            "account skipped: @tech (needs reauth)",
        ),
        (
            {"no_quota_accounts": ("@tech",), "scripts": Counter(publishing=1)},
            "upload quota used up for @tech",
        ),
        ({"accounts": 0, "scripts": Counter(published=1)}, "no active publishing account"),
        ({"scripts": Counter(failed=1)}, "scripts not published (1 failed)"),
        (
            {"rejected_topics": ("blocked_term",), "topics_open": 1},
            "1 topic(s) left undecided",
        ),
        ({}, "records no reason"),
    ],
)
def test_a_hold_or_fault_is_named_and_fails_the_demo(fields, words) -> None:
    verdict = unpublished_reason(facts(**fields))
    assert words in verdict.reason and not verdict.expected


def test_the_summary_counts_videos_and_exits_on_the_reasons() -> None:
    published = PartitionFacts("2026-11-29|science", "science", True, videos=2)
    rejected = facts(rejected_topics=("repeat",) * 3)
    lines, code = summary([published, rejected], [], 2.0, "/outbox")
    assert lines[0].startswith("1/2 dimensions published (2 videos) in 2.0s")
    assert lines[1].startswith("  tech: nothing to publish: every topic was rejected: 3 as repeats")
    assert "nothing to fix (exit status 0)" in lines[-1] and code == 0

    capped = facts(budget_exhausted=True)
    lines, code = summary([published, capped], [], 2.0, "/outbox")
    assert "tech: not published: the daily budget cap" in lines[1]
    assert lines[-1] == "held back: tech (see above; exit status 1)" and code == 1
