"""What the database says of one partition, gathered in one place: `make demo`'s summary reads
its PartitionFacts, `mdame status` and the publications asset's metadata the whole
PartitionStatus (the Dagster runs are passed in: this layer does not read Dagster).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from datetime import date, datetime
from typing import Any

from mdame_core.state import StateStore
from mdame_domain.partition_status import (
    JobRun,
    OpenAlert,
    PartitionStatus,
    Wait,
    ran_ok,
    stage_reached,
)
from mdame_domain.publish_summary import HOOK, PartitionFacts
from mdame_pipeline.lifecycle import SCRIPT_GOAL
from mdame_pipeline.locks import dimension_lock_name

# Alerts have no "resolved" state: those seen within this many hours count as open.
OPEN_ALERT_HOURS = 24


def _split(partition_key: str) -> tuple[date, str]:
    day, _, slug = partition_key.partition("|")
    return date.fromisoformat(day), slug


def partition_facts(
    state: StateStore, partition_key: str, ran_ok: bool = True, run_error: str = ""
) -> PartitionFacts:
    """The partition's publications, and what a partition that published nothing left behind
    to say why (read with the app role); `ran_ok`/`run_error`: its runs' outcome."""
    return _gather(state, partition_key, ran_ok, run_error)[0]


def partition_status(
    state: StateStore,
    partition_key: str,
    runs: Sequence[JobRun],
    waits: Sequence[Wait] = (),
) -> PartitionStatus:
    """The whole status: `runs`, the newest run of each job for the partition (Dagster's),
    decide whether a stage failed; `waits` adds what only the run records tell (a retry's
    backoff)."""
    ok, error = ran_ok(runs)
    facts, found = _gather(state, partition_key, ok, error)
    flow = state.work_flow("script", SCRIPT_GOAL)
    alerts = tuple(
        OpenAlert(cause, day, text, occurrences)
        for cause, day, text, occurrences, _ in state.recent_alerts(
            facts.dimension, OPEN_ALERT_HOURS
        )
    )
    every = sorted({*found, *waits}, key=lambda w: (w.until, w.what))
    platforms = {a.handle: a.platform for a in state.list_accounts(facts.dimension)}
    return PartitionStatus(
        facts, stage_reached(facts, flow), tuple(runs), tuple(every), alerts, platforms
    )


def _gather(
    state: StateStore, partition_key: str, ran_ok: bool, run_error: str
) -> tuple[PartitionFacts, list[Wait]]:
    day, slug = _split(partition_key)
    dim = state.get_dimension(slug)
    if dim is None:
        return PartitionFacts(partition_key, slug, ran_ok, run_error, registered=False), []
    now = state.db_now()
    where: dict[str, Any] = {"dimension_id": dim.id, "partition_date": day}
    rejected_topics, open_topics = [], 0
    for topic in state.list_work_units("topic", **where):
        if topic.state == "rejected":
            hook = topic.result.get("rejected_by") == HOOK
            rejected_topics.append(HOOK if hook else topic.result.get("safety_rule") or "?")
        elif topic.state in ("candidate", "approved"):
            open_topics += 1
    scripts = state.list_work_units("script", **where)
    pubs = state.partition_publications(dim.id, day)
    waits: list[Wait] = []
    blocked, no_quota = set(), set()
    for pub, _, handle, active, reauth, paused_until, quota_resets in pubs:
        if pub != "pending" or not active:
            continue
        if reauth or paused_until:
            blocked.add(f"{handle} ({'needs reauth' if reauth else 'paused'})")
            if paused_until and not reauth:
                waits.append(Wait(f"account {handle}'s pause (the platform's quota)", paused_until))
        else:
            no_quota.add(handle)
            waits.append(Wait(f"account {handle}'s upload quota reset", quota_resets))
    trends, budget_refused, budget_resets = state.partition_trends_and_budget(dim.id, day)
    if budget_refused:
        waits.append(Wait("the next day's budget (daily_budget_usd)", budget_resets))
    halts = state.partition_voice_halts(dim.id, day)
    for _, retry_at in halts:
        if retry_at is not None and retry_at > now:
            waits.append(Wait("a halted script's voice retry", retry_at))
    waits_until, waits_for = state.partition_wait(dim.id, day)
    ahead = waits_until if waits_until is not None and waits_until > now else None
    if ahead is not None:
        waits.append(Wait(waits_for, ahead))
    lock = state.get_lock(dimension_lock_name(slug))
    if lock is not None and not lock.released and lock.expires_at > now:
        waits.append(Wait(f"the dimension's pipeline lock, held by {lock.holder}", lock.expires_at))
    facts = PartitionFacts(
        partition_key=partition_key,
        dimension=slug,
        ran_ok=ran_ok,
        run_error=run_error,
        videos=sum(pub == "published" and script == "published" for pub, script, *_ in pubs),
        trends=trends,
        rejected_topics=tuple(rejected_topics),
        rejected_scripts=tuple(
            s.result.get("safety_rule") or s.result.get("reason") or "?"
            for s in scripts
            if s.state == "rejected"
        ),
        topics_open=open_topics,
        scripts=Counter(s.state for s in scripts),
        budget_exhausted=budget_refused,
        voice_halts=tuple(f"{reason} ({_retry(at)})" for reason, at in halts),
        accounts=len(state.list_accounts(slug, active_only=True)),
        blocked_accounts=tuple(sorted(blocked)),
        no_quota_accounts=tuple(sorted(no_quota)),
        waits_until=ahead,
        waits_for=waits_for or PartitionFacts.waits_for,
    )
    return facts, waits


def _retry(at: datetime | None) -> str:
    return f"voice retried from {at:%Y-%m-%d %H:%M %Z}" if at else "no retry left: failed"
