"""One partition's status as an operator reads it (`mdame status`, and the publications asset's
metadata in the UI): the stage it reached, the last run of each job and its outcome, why nothing
was published (in `make demo`'s summary's words: publish_summary), what waits and until when,
and the open alerts with the one command that fixes each. Plain data in, text out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from mdame_domain.alerts import CAUSES
from mdame_domain.publish_summary import PartitionFacts, unpublished_reason


@dataclass(frozen=True)
class JobRun:
    """The newest run of one job for the partition, as Dagster recorded it."""

    job: str
    status: str  # Dagster's run status, e.g. SUCCESS, FAILURE, STARTED
    run_id: str
    ended_at: datetime | None = None
    error: str = ""  # the first failed step's error, for a failed run

    @property
    def failed(self) -> bool:
        return self.status == "FAILURE"


@dataclass(frozen=True)
class Wait:
    what: str
    until: datetime


@dataclass(frozen=True)
class OpenAlert:
    cause: str
    day: date
    text: str  # the alert as sent: its headline line, then the reason
    occurrences: int = 1


@dataclass(frozen=True)
class PartitionStatus:
    facts: PartitionFacts
    stage: str
    runs: tuple[JobRun, ...] = ()
    waits: tuple[Wait, ...] = ()
    alerts: tuple[OpenAlert, ...] = ()
    platforms: Mapping[str, str] = field(default_factory=dict)  # account handle -> platform


# The platforms whose consent flow `mdame accounts connect` runs with --platform (YouTube's is
# the default one): as mdame_resources' grants say it.
PLATFORM_FLOWS = ("tiktok", "instagram")


def ran_ok(runs: Sequence[JobRun]) -> tuple[bool, str]:
    """Whether no job's newest run failed, and the first failed one's error."""
    for run in runs:
        if run.failed:
            return False, f"{run.job}: {run.error or 'run failed'}"
    return True, ""


def stage_reached(facts: PartitionFacts, flow: Sequence[str]) -> str:
    """How far the partition's work got: its scripts' furthest state along `flow` (the script
    states in order, rejected ones aside), else its topics, else its trends."""
    if not facts.registered:
        return "not registered"
    if facts.scripts:
        live = [s for s in facts.scripts if s != "rejected"] or ["rejected"]
        furthest = max(live, key=lambda s: flow.index(s) if s in flow else -1)
        counts = ", ".join(f"{n} {s}" for s, n in sorted(facts.scripts.items()))
        return f"scripts {furthest} ({counts})"
    topics = len(facts.rejected_topics) + facts.topics_open
    if topics:
        return f"topics ({len(facts.rejected_topics)} rejected, {facts.topics_open} undecided)"
    if facts.trends:
        return f"trends ({facts.trends}), no topic yet"
    return "not started (no trend recorded)"


_COMMAND = re.compile(r"`(mdame [^`]+)`")
_FIX = re.compile(r"\bfix: ([^;\n]+)")
_ACCOUNT = re.compile(r"\baccount ([\w.@-]+):")


def fix_command(
    alert: OpenAlert, slug: str, day: date, platforms: Mapping[str, str] | None = None
) -> str:
    """The one thing to run (or do) for `alert` of `slug`'s partition of `day`: the command the
    alert's own text names (the publisher names the account to connect again), else the
    cause's."""
    if found := _COMMAND.search(alert.text):
        return found.group(1)
    when = day.isoformat()
    account = _ACCOUNT.search(alert.text)
    named = _FIX.search(alert.text)
    match alert.cause:
        case "reauth_needed":
            if account is None:
                return f"mdame accounts connect {slug}"
            handle = account.group(1)
            platform = (platforms or {}).get(handle, "")
            flag = f" --platform {platform}" if platform in PLATFORM_FLOWS else ""
            return f"mdame accounts connect {slug}{flag} --account {handle}"
        case "provider_refused":
            step = f"{named.group(1).strip()}, then " if named else ""
            return f"{step}mdame calls retry --dimension {slug} --day {when}"
        case "budget_cap":
            return (
                f"mdame dimensions sync after raising daily_budget_usd in dimensions/{slug}.yaml "
                "(or wait for tomorrow's budget)"
            )
        case "quota_exhausted":
            return "none: publishing resumes once the quota resets (see waits)"
        case "halt":
            if named:
                return f"{named.group(1).strip()}, then mdame dimensions sync"
            return "none: the voice is retried on its own (see waits)"
        case "disk_low":
            return "mdame doctor --only disk (then free space under MDAME_HOME)"
        case _:  # run_failure, check_blocked: fix what the reason names, then run it again
            return f"mdame backfill --dimension {slug} --from {when} (once the cause is fixed)"


def _moment(at: datetime | None) -> str:
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC" if at else "-"


def _first_line(text: str, limit: int = 160) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def status_rows(status: PartitionStatus) -> list[tuple[str, str]]:
    """The partition's status as (what, value) rows, in reading order."""
    facts = status.facts
    ref_day = date.fromisoformat(facts.partition_key.partition("|")[0])
    rows = [("stage", status.stage)]
    for run in status.runs:
        ended = _moment(run.ended_at) if run.ended_at else "(not ended)"
        outcome = f"{run.status.lower()} {ended}, run {run.run_id[:8]}"
        rows.append((f"last {run.job}", outcome + (f": {run.error}" if run.error else "")))
    if not status.runs:
        rows.append(("runs", "none recorded for this partition"))
    if facts.videos:
        published = f"yes: {facts.videos} video{'' if facts.videos == 1 else 's'}"
    elif not status.runs and facts.registered and not facts.trends and not facts.scripts:
        published = "no: the partition has not run yet"  # not "no trends": nothing looked
    else:
        published = f"no: {unpublished_reason(facts).reason}"
    rows.append(("published", published))
    for wait in status.waits:
        rows.append(("waits", f"{wait.what} until {_moment(wait.until)}"))
    if not status.waits:
        rows.append(("waits", "nothing"))
    for alert in status.alerts:
        headline, _, reason = alert.text.partition("\n")
        said = _first_line(reason or headline)
        repeats = f" (x{alert.occurrences})" if alert.occurrences > 1 else ""
        rows.append(
            (
                f"alert {alert.cause}",
                f"{alert.day} {CAUSES.get(alert.cause, alert.cause)}{repeats}: {said}",
            )
        )
        rows.append(("  fix", fix_command(alert, facts.dimension, ref_day, status.platforms)))
    if not status.alerts:
        rows.append(("alerts", "none open"))
    return rows


def status_text(status: PartitionStatus) -> str:
    """A terminal table: the partition's key, then its rows in two aligned columns."""
    rows = status_rows(status)
    width = max(len(what) for what, _ in rows)
    lines = [status.facts.partition_key, "-" * len(status.facts.partition_key)]
    lines += [f"{what.ljust(width)}  {value}" for what, value in rows]
    return "\n".join(lines)


def _cell(text: str) -> str:
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def status_markdown(status: PartitionStatus) -> str:
    """The same rows as a Markdown table (the UI's metadata)."""
    lines = [f"**{_cell(status.facts.partition_key)}**", "", "| | |", "|---|---|"]
    lines += [f"| {_cell(what)} | {_cell(value)} |" for what, value in status_rows(status)]
    return "\n".join(lines)
