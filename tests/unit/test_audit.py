"""The analytics model and the Strategic Auditor's math, text and plots (issue 12)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

import pytest

from mdame_domain.analytics import (
    VideoCounters,
    batches,
    parse_statistics,
    quota_units,
    simulated_counters,
)
from mdame_domain.audit import (
    Week,
    category_of,
    percentile,
    relative_change,
    report_markdown,
    split_message,
    week_contact_sheets,
    weekly_metrics,
)
from mdame_domain.report_plots import PNG_SIGNATURE, render_plots

MONDAY = date(2026, 11, 23)


def test_percentiles_interpolate_like_numpy() -> None:
    assert percentile([], 50) is None
    assert percentile([7.0], 95) == 7.0
    assert percentile([1, 2, 3, 4], 50) == 2.5
    assert percentile(list(range(1, 101)), 95) == pytest.approx(95.05)
    with pytest.raises(ValueError, match="outside"):
        percentile([1], 101)
    assert relative_change(150, 100) == 0.5
    assert relative_change(5, 0) is None


def test_weeks_run_monday_to_sunday() -> None:
    assert Week.of(date(2026, 11, 29)).start == MONDAY  # a Sunday
    assert Week.of(MONDAY).end == date(2026, 11, 29)
    assert len(Week(MONDAY).days) == 7
    with pytest.raises(ValueError, match="not one"):
        Week(date(2026, 11, 24))


def test_messages_are_split_at_line_ends_within_the_limit() -> None:
    text = "\n".join(f"line {i} " + "x" * 50 for i in range(200))
    pieces = split_message(text, 4096)
    assert all(len(p) <= 4096 for p in pieces) and len(pieces) > 2
    assert "\n".join(pieces) == text
    assert split_message("y" * 9000, 4096) == ["y" * 4096, "y" * 4096, "y" * 808]


def test_the_offline_audience_is_seeded_plausible_and_never_shrinks() -> None:
    published = date(2026, 11, 20)
    days = [published + timedelta(days=i) for i in range(-1, 15)]
    series = [simulated_counters("outbox-abc", published, d) for d in days]
    assert series[0] == VideoCounters(0, 0, 0)  # before it was published
    assert series == [simulated_counters("outbox-abc", published, d) for d in days]
    views = [c.views for c in series]
    assert views == sorted(views) and views[-1] > 0
    assert all(c.likes <= c.views * 0.08 + 1 and c.comments <= c.likes for c in series)
    others = {simulated_counters(f"outbox-{i}", published, days[-1]).views for i in range(20)}
    assert len(others) > 15 and 100 < max(others) <= 30_000


def test_ids_are_read_in_calls_of_fifty() -> None:
    ids = [f"v{i}" for i in range(120)] + ["v0"]
    assert [len(b) for b in batches(ids)] == [50, 50, 20]
    assert quota_units(120) == 3 and quota_units(50) == 1 and quota_units(0) == 0
    parsed = parse_statistics([{"id": "a", "statistics": {"viewCount": "12", "likeCount": "3"}}])
    assert parsed == {"a": VideoCounters(12, 3, 0)}  # likes hidden or comments off: 0
    with pytest.raises(ValueError, match="viewCount"):
        parse_statistics([{"id": "a", "statistics": {"viewCount": "-4"}}])
    with pytest.raises(ValueError, match="without statistics"):
        parse_statistics([{"id": "a"}])


def _at(day: int, hour: int) -> datetime:
    return datetime(2026, 11, day, hour, tzinfo=UTC)


def _facts() -> dict:
    transitions = []
    for script, fail_at in ((1, None), (2, "planned"), (3, "voice_queued")):
        walk = ["approved", "planned", "visuals_ready", "voice_queued", "voiced", "render_queued"]
        walk += ["rendered", "publishing", "published"]
        previous = "drafted"
        for i, state in enumerate(walk):
            if fail_at == previous:
                to = "halted" if previous == "voice_queued" else "failed"
                transitions.append(
                    {"script_id": script, "from": previous, "to": to, "at": _at(24, i)}
                )
                break
            transitions.append(
                {"script_id": script, "from": previous, "to": state, "at": _at(24, i)}
            )
            previous = state
    return {
        "scripts": [
            {"id": 1, "state": "published", "hook_score": 0.8},
            {"id": 2, "state": "failed", "hook_score": 0.74},
            {"id": 3, "state": "halted", "hook_score": None},
        ],
        "transitions": transitions,
        "topics": [
            {"state": "scripted", "rejected_by": None},
            {"state": "rejected", "rejected_by": "hook"},
        ],
        "trends": 9,
        "safety": [
            {"verdict": "block", "rule": "violence", "subject_kind": "topic"},
            {"verdict": "review", "rule": "medical", "subject_kind": "script"},
        ],
        "spent_micros": 1_250_000,
        "quota": {"insert": 1, "units": 52},
        "scenes": [
            {"state": "ready", "cached": True},
            {"state": "ready", "cached": False},
            {"state": "queued", "cached": False},
        ],
        "gpu_seconds": 12.5,
        "videos": [
            {
                "publication_id": 7,
                "published_on": date(2026, 11, 24),
                "keywords": ["ai"],
                "views": 900,
                "likes": 45,
            },
            {
                "publication_id": 8,
                "published_on": date(2026, 11, 18),
                "keywords": [],
                "views": 100,
                "likes": 2,
            },
        ],  # fmt: skip
        "daily": [
            {"day": date(2026, 11, 16), "publication_id": 8, "views": 10, "likes": 0},
            {"day": date(2026, 11, 22), "publication_id": 8, "views": 60, "likes": 1},
            {"day": date(2026, 11, 25), "publication_id": 7, "views": 300, "likes": 10},
            {"day": date(2026, 11, 29), "publication_id": 7, "views": 900, "likes": 45},
            {"day": date(2026, 11, 29), "publication_id": 8, "views": 100, "likes": 2},
        ],
    }


def test_weekly_metrics_from_facts() -> None:
    m = weekly_metrics(
        _facts(), Week(MONDAY), budget_usd_per_day=2.0, hook_threshold=0.72,
        disk_bytes={"media": 2048},
    )  # fmt: skip
    assert m["videos_published"] == 1
    assert m["stage_failure_rate"]["scene_clips"] == 0.3333
    assert m["stage_failure_rate"]["renders"] == 0.0
    assert m["halt_rate"] == 0.5  # of the two scripts that reached voice
    assert m["hook_scores"] == {"n": 2, "mean": 0.77, "p50": 0.77, "min": 0.74}
    assert m["hook_pass_rate"] == pytest.approx(2 / 3, abs=1e-4)
    assert m["safety_rejections"] == {"violence": 1} and m["safety_reviews"] == 1
    assert m["spend"] == {"spent_usd": 1.25, "budget_usd": 14.0}
    assert m["quota_used"] == 52 and m["quota_by_bucket"] == {"insert": 1, "units": 52}
    assert m["scene_cache_hit_rate"] == 0.5 and m["gpu_seconds"] == 12.5
    assert m["stage_latency_s"]["scene_clips"] == {"n": 2, "p50": 3600.0, "p95": 3600.0}
    assert m["views_per_video"] == 500.0 and m["likes_per_video"] == 23.5
    # 60 seen by the end of the week before; 1000 by Sunday: 940 gained, vs 60 the week before.
    assert m["views_gained"] == 940 and m["views_trend"] == pytest.approx(880 / 60, abs=1e-4)
    assert m["views_by_day"]["2026-11-29"] == 1000
    assert m["category_views"] == {
        "ai": {"videos": 1, "views": 900, "likes": 45},
        "other": {"videos": 1, "views": 100, "likes": 2},
    }
    assert m["trend_volume"] == {"candidates": 9, "passed_gate": 1}
    assert m["disk_bytes"] == {"media": 2048}
    assert category_of(["  AI "]) == "ai"

    text = report_markdown("science", m, ["media://x.png"])
    assert text.startswith("# Strategic Auditor: science, week 2026-11-23 to 2026-11-29")
    assert "| HALT rate | 50.0% |" in text and "| scene_clips | 33.3% |" in text
    assert "- violence: 1" in text and "![plot 1](media://x.png)" in text
    assert "- media: 2.0 KiB" in text

    plots = render_plots("science", m)
    assert [p.name for p in plots] == ["views.png", "latency.png", "categories.png"]
    for plot in plots:
        assert plot.png.startswith(PNG_SIGNATURE) and len(plot.png) > 5_000
        assert 0 < len(plot.caption) <= 1024


def test_an_empty_week_still_makes_a_report() -> None:
    empty = {
        "scripts": [], "transitions": [], "topics": [], "trends": 0, "safety": [],
        "spent_micros": 0, "quota": {}, "scenes": [], "gpu_seconds": 0, "videos": [],
        "daily": [],
    }  # fmt: skip
    m = weekly_metrics(empty, Week(MONDAY), budget_usd_per_day=1.0, hook_threshold=0.7)
    assert m["halt_rate"] is None and m["views_per_video"] is None and m["views_trend"] is None
    assert m["disk_bytes"] == {}
    assert "not measured" in report_markdown("science", m)
    assert all(p.png.startswith(PNG_SIGNATURE) for p in render_plots("science", m))


def test_the_weeks_contact_sheets_go_in_the_report() -> None:
    from mdame_assets.defs.auditor.assets import telegram_text

    def video(pid: int, day: date, sheet: bool) -> dict:
        found = {"uri": f"media://sha256/{pid:064x}.jpg", "sha256": f"{pid:064x}"}
        return {
            "publication_id": pid,
            "published_on": day,
            "contact_sheet": found if sheet else None,
        }

    facts = {
        "videos": [
            video(1, MONDAY - timedelta(days=1), True),  # the week before
            video(2, MONDAY, True),
            video(3, MONDAY + timedelta(days=2), False),  # a render made before sheets
            *(video(10 + i, MONDAY + timedelta(days=6), True) for i in range(15)),
        ]
    }
    sheets = week_contact_sheets(facts, Week(MONDAY))
    assert len(sheets) == 14  # the latest: with three plots, within a report's 20 images
    assert [s["name"] for s in sheets[:2]] == ["sheet-11.jpg", "sheet-12.jpg"]
    assert sheets[0] == {
        "name": "sheet-11.jpg",
        "uri": f"media://sha256/{11:064x}.jpg",
        "sha256": f"{11:064x}",
        "caption": "video 11, published 2026-11-29",
    }
    assert [s["name"] for s in week_contact_sheets(facts, Week(MONDAY), 20)][:1] == ["sheet-2.jpg"]

    empty = {
        "scripts": [], "transitions": [], "topics": [], "trends": 0, "safety": [],
        "spent_micros": 0, "quota": {}, "scenes": [], "gpu_seconds": 0, "videos": [],
        "daily": [],
    }  # fmt: skip
    m = weekly_metrics(empty, Week(MONDAY), budget_usd_per_day=1.0, hook_threshold=0.7)
    text = report_markdown("science", m, ["media://p.png"], [("video 2, published x", "media://s")])
    assert text.index("## Contact sheets") < text.index("## Plots")
    assert "![video 2, published x](media://s)" in text
    # The chat gets the words, not the images: the section says where the sheets are.
    chat = telegram_text(text)
    assert "![" not in chat and "## Plots" not in chat
    assert "## Contact sheets" in chat and "a frame of every scene" in chat
