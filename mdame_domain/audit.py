"""The Strategic Auditor's weekly metrics and Markdown summary.

Plain functions over the facts `StateStore.auditor_facts` reads (plain dicts and lists): the
math (percentiles, rates, trend) and the text live here, the reads in the state client, the
plots in mdame_domain.report_plots and the delivery in the auditor asset.

Weeks run Monday to Sunday (UTC partition days); a week is named by its Monday.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from typing import Any

# A script waits in these states while this stage works on it (its failures count there).
STATE_STAGE = {
    "drafted": "scripts",
    "approved": "scene_plan",
    "planned": "scene_clips",
    "visuals_ready": "voice_tracks",
    "voice_queued": "voice_tracks",
    "halted": "voice_tracks",
    "voiced": "renders",
    "render_queued": "renders",
    "rendered": "publications",
    "publishing": "publications",
}
# A stage's latency: from the script entering the first state to entering the second.
STAGE_SPANS = {
    "scene_plan": ("approved", "planned"),
    "scene_clips": ("planned", "visuals_ready"),
    "voice_tracks": ("visuals_ready", "voiced"),
    "renders": ("voiced", "rendered"),
    "publications": ("rendered", "published"),
}
STAGES = ("scripts", *STAGE_SPANS)
OTHER_CATEGORY = "other"
# The most contact sheets a report carries (the latest videos'): with its three plots, within
# the 20 images a stored report may name.
MAX_REPORT_SHEETS = 14


@dataclass(frozen=True)
class Week:
    """A Monday-to-Sunday week, named by its Monday."""

    start: date

    def __post_init__(self) -> None:
        if self.start.isoweekday() != 1:
            raise ValueError(f"a week starts on a Monday; {self.start} is not one")

    @property
    def end(self) -> date:
        """Its Sunday (inclusive)."""
        return self.start + timedelta(days=6)

    @property
    def days(self) -> list[date]:
        return [self.start + timedelta(days=i) for i in range(7)]

    @classmethod
    def of(cls, day: date) -> Week:
        """The week a day falls in."""
        return cls(day - timedelta(days=day.isoweekday() - 1))


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation between closest ranks (as
    numpy's default); None for no values."""
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    if not ordered:
        return None
    rank = (len(ordered) - 1) * q / 100
    low, high = math.floor(rank), math.ceil(rank)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def rate(part: int, whole: int) -> float | None:
    """part / whole, None when there is nothing to divide by."""
    return None if whole == 0 else round(part / whole, 4)


def relative_change(current: float, previous: float) -> float | None:
    """(current - previous) / previous; None without a previous amount to compare with."""
    return None if previous <= 0 else round((current - previous) / previous, 4)


def category_of(keywords: Sequence[str]) -> str:
    """A video's topic category: the first dimension keyword its trend matched."""
    return (
        str(keywords[0]).strip().lower()
        if keywords and str(keywords[0]).strip()
        else (OTHER_CATEGORY)
    )


def _round(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def _stage_failures(facts: Mapping[str, Any]) -> dict[str, float | None]:
    entered: dict[str, set[int]] = defaultdict(set)
    failed: dict[str, set[int]] = defaultdict(set)
    for script in facts["scripts"]:
        entered["scripts"].add(script["id"])  # recorded scripts all start in 'drafted'
    for t in facts["transitions"]:
        for state in (t["from"], t["to"]):
            if state in STATE_STAGE:
                entered[STATE_STAGE[state]].add(t["script_id"])
        if t["to"] == "failed" and t["from"] in STATE_STAGE:
            failed[STATE_STAGE[t["from"]]].add(t["script_id"])
    return {stage: rate(len(failed[stage]), len(entered[stage])) for stage in STAGES}


def _latencies(facts: Mapping[str, Any]) -> dict[str, dict[str, float | None]]:
    entered_at: dict[tuple[int, str], datetime] = {}
    for t in facts["transitions"]:
        # The first time a script reached a state (a requeue re-enters it later).
        entered_at.setdefault((t["script_id"], t["to"]), t["at"])
    spans: dict[str, list[float]] = defaultdict(list)
    for stage, (start, end) in STAGE_SPANS.items():
        for (script_id, state), began in entered_at.items():
            if state != start or (script_id, end) not in entered_at:
                continue
            spans[stage].append((entered_at[(script_id, end)] - began).total_seconds())
    return {
        stage: {
            "n": len(spans[stage]),
            "p50": _round(percentile(spans[stage], 50)),
            "p95": _round(percentile(spans[stage], 95)),
        }
        for stage in STAGE_SPANS
    }


def _views_by_day(daily: Sequence[Mapping[str, Any]], days: Sequence[date]) -> dict[date, int]:
    """Total views of all videos as observed at the end of each day (a video not read that day
    counts with its latest earlier reading)."""
    latest: dict[int, int] = {}
    by_day: dict[date, list[Mapping[str, Any]]] = defaultdict(list)
    for row in daily:
        by_day[row["day"]].append(row)
    out: dict[date, int] = {}
    first = min([*days, *by_day]) if by_day else min(days)
    day = first
    while day <= max(days):
        for row in by_day.get(day, []):
            latest[row["publication_id"]] = int(row["views"])
        if day in days:
            out[day] = sum(latest.values())
        day += timedelta(days=1)
    return out


def weekly_metrics(
    facts: Mapping[str, Any],
    week: Week,
    *,
    budget_usd_per_day: float,
    hook_threshold: float,
    disk_bytes: Mapping[str, int] | None = None,
) -> dict[str, Any]:
    """The metrics of one dimension's week, as JSON-ready values (the reports.metrics row).
    Rates are None where nothing happened to rate."""
    scores = [s["hook_score"] for s in facts["scripts"] if s["hook_score"] is not None]
    hook_rejected = sum(1 for t in facts["topics"] if t["rejected_by"] == "hook")
    reached_voice = {t["script_id"] for t in facts["transitions"] if t["to"] == "voice_queued"}
    halted = {t["script_id"] for t in facts["transitions"] if t["to"] == "halted"}
    ready = [s for s in facts["scenes"] if s["state"] == "ready"]

    videos = list(facts["videos"])
    this_week = [v for v in videos if week.start <= v["published_on"] <= week.end]
    observed = [v for v in videos if v["views"] is not None]
    categories: dict[str, dict[str, int]] = defaultdict(
        lambda: {"videos": 0, "views": 0, "likes": 0}
    )
    for v in videos:
        entry = categories[category_of(v["keywords"])]
        entry["videos"] += 1
        entry["views"] += int(v["views"] or 0)
        entry["likes"] += int(v["likes"] or 0)

    previous = Week(week.start - timedelta(days=7))
    totals = _views_by_day(facts["daily"], [previous.end, *week.days])
    gained = totals[week.end] - totals[previous.end]
    earlier = _views_by_day(
        [r for r in facts["daily"] if r["day"] <= previous.end],
        [previous.start - timedelta(days=1), previous.end],
    )
    gained_before = earlier[previous.end] - earlier[previous.start - timedelta(days=1)]

    return {
        "week_start": week.start.isoformat(),
        "week_end": week.end.isoformat(),
        "videos_published": len(this_week),
        "scripts": len(facts["scripts"]),
        "stage_failure_rate": _stage_failures(facts),
        "halt_rate": rate(len(halted), len(reached_voice)),
        "hook_scores": {
            "n": len(scores),
            "mean": _round(sum(scores) / len(scores)) if scores else None,
            "p50": _round(percentile(scores, 50)),
            "min": _round(min(scores)) if scores else None,
        },
        "hook_threshold": hook_threshold,
        "hook_pass_rate": rate(len(scores), len(scores) + hook_rejected),
        "safety_rejections": dict(
            sorted(Counter(s["rule"] for s in facts["safety"] if s["verdict"] == "block").items())
        ),
        "safety_reviews": sum(1 for s in facts["safety"] if s["verdict"] == "review"),
        "spend": {
            "spent_usd": round(facts["spent_micros"] / 1_000_000, 4),
            "budget_usd": round(budget_usd_per_day * 7, 4),
        },
        "quota_used": int(facts["quota"].get("units", 0)),
        "quota_by_bucket": dict(sorted(facts["quota"].items())),
        "scene_cache_hit_rate": rate(sum(1 for s in ready if s["cached"]), len(ready)),
        "gpu_seconds": round(float(facts["gpu_seconds"]), 3),
        "stage_latency_s": _latencies(facts),
        "videos_observed": len(observed),
        "views_per_video": _round(
            sum(v["views"] for v in observed) / len(observed) if observed else None, 1
        ),
        "likes_per_video": _round(
            sum(v["likes"] for v in observed) / len(observed) if observed else None, 1
        ),
        "views_gained": gained,
        "views_trend": relative_change(gained, gained_before),
        "views_by_day": {d.isoformat(): n for d, n in sorted(totals.items())},
        "category_views": dict(sorted(categories.items())),
        "trend_volume": {
            "candidates": int(facts["trends"]),
            "passed_gate": sum(
                1 for t in facts["topics"] if t["state"] in ("approved", "scripted")
            ),
        },
        "disk_bytes": dict(disk_bytes or {}),
    }


def week_contact_sheets(
    facts: Mapping[str, Any], week: Week, limit: int = MAX_REPORT_SHEETS
) -> list[dict[str, str]]:
    """The contact sheets of the videos published in the week (the latest `limit`), as report
    images: name (sheet-<publication id>.jpg), uri, sha256 and a caption."""
    sheets = []
    for video in facts["videos"]:
        sheet = video.get("contact_sheet")
        if not sheet or not week.start <= video["published_on"] <= week.end:
            continue
        sheets.append(
            {
                "name": f"sheet-{video['publication_id']}.jpg",
                "uri": str(sheet["uri"]),
                "sha256": str(sheet["sha256"]),
                "caption": f"video {video['publication_id']}, "
                f"published {video['published_on'].isoformat()}",
            }
        )
    return sheets[-limit:] if limit > 0 else []


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value * 100:.1f}%"


def _num(value: float | None, digits: int = 1) -> str:
    return "n/a" if value is None else f"{value:,.{digits}f}"


def _size(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


def report_markdown(
    dimension: str,
    metrics: Mapping[str, Any],
    images: Sequence[str] = (),
    sheets: Sequence[tuple[str, str]] = (),
) -> str:
    """The report as Markdown (GitHub-flavoured tables). `images` are Markdown image targets
    (URIs or data URIs) placed at the end, one per plot; `sheets` the week's videos' contact
    sheets, (caption, target) each, before them."""
    m = metrics
    hook = m["hook_scores"]
    lines = [
        f"# Strategic Auditor: {dimension}, week {m['week_start']} to {m['week_end']}",
        "",
        "| Metric | Value |",
        "|---|---|",
        f"| Videos published | {m['videos_published']} |",
        f"| Scripts | {m['scripts']} |",
        f"| HALT rate | {_pct(m['halt_rate'])} |",
        f"| Hook scores (n / mean / p50 / min) | {hook['n']} / {_num(hook['mean'], 3)} / "
        f"{_num(hook['p50'], 3)} / {_num(hook['min'], 3)} |",
        f"| Hook pass rate (threshold {m['hook_threshold']}) | {_pct(m['hook_pass_rate'])} |",
        f"| Spend / budget (USD) | {m['spend']['spent_usd']:.2f} / "
        f"{m['spend']['budget_usd']:.2f} |",
        f"| Quota used (units) | {m['quota_used']} |",
        f"| Scene-cache hit rate | {_pct(m['scene_cache_hit_rate'])} |",
        f"| GPU seconds | {_num(m['gpu_seconds'])} |",
        f"| Views per video | {_num(m['views_per_video'])} |",
        f"| Likes per video | {_num(m['likes_per_video'])} |",
        f"| Views gained this week (trend) | {m['views_gained']:,} ({_pct(m['views_trend'])}) |",
        f"| Trend candidates / passed gate | {m['trend_volume']['candidates']} / "
        f"{m['trend_volume']['passed_gate']} |",
        "",
        "## Stages",
        "",
        "| Stage | Failure rate | Latency p50 (s) | Latency p95 (s) |",
        "|---|---|---|---|",
    ]
    for stage, failure in m["stage_failure_rate"].items():
        latency = m["stage_latency_s"].get(stage, {})
        lines.append(
            f"| {stage} | {_pct(failure)} | {_num(latency.get('p50'))} | "
            f"{_num(latency.get('p95'))} |"
        )
    lines += ["", "## Safety rejections", ""]
    rejections = m["safety_rejections"]
    lines += [f"- {rule}: {n}" for rule, n in rejections.items()] or ["- none"]
    lines += [
        "",
        "## Views by category",
        "",
        "| Category | Videos | Views | Likes |",
        "|---|---|---|---|",
    ]
    for category, c in m["category_views"].items():
        lines.append(f"| {category} | {c['videos']} | {c['views']:,} | {c['likes']:,} |")
    lines += ["", "## Disk", ""]
    disk = m["disk_bytes"]
    lines += [f"- {kind}: {_size(n)}" for kind, n in sorted(disk.items())] or [
        "- not measured (no disk-usage function in this build)"
    ]
    if sheets:
        lines += [
            "",
            "## Contact sheets",
            "",
            f"{len(sheets)} of the week's published videos (the latest {MAX_REPORT_SHEETS} at "
            "most): a frame of every scene, with its engine and relevance score (the images "
            "are in the UI's copy of this report and in `mdame report`'s).",
            "",
        ]
        lines += [f"![{caption}]({target})" for caption, target in sheets]
    if images:
        lines += ["", "## Plots", ""]
        lines += [f"![plot {i + 1}]({target})" for i, target in enumerate(images)]
    return "\n".join(lines) + "\n"


def split_message(text: str, limit: int = 4096) -> list[str]:
    """Text in pieces of at most `limit` characters, cut at line ends where one is near."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    pieces: list[str] = []
    rest = text
    while len(rest) > limit:
        cut = rest.rfind("\n", 0, limit + 1)
        if cut < limit // 2:
            cut = limit
        pieces.append(rest[:cut])
        rest = rest[cut:].lstrip("\n")
    if rest:
        pieces.append(rest)
    return pieces
