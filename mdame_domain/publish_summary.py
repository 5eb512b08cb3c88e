"""Why a partition published nothing, decided from what the database recorded (and the run's
outcome): `make demo`'s summary says it per dimension, and its exit status follows whether the
reason is the pipeline doing its job (every topic rejected by the dimension's own rules) or
something an operator has to look at (a failed stage, the budget cap, a voice HALT, upload
quota, an account that may not be published to).
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from mdame_domain.waits import waiting_words


@dataclass(frozen=True)
class PartitionFacts:
    """One partition (day x dimension) after its run, as the database and the run tell it."""

    partition_key: str
    dimension: str
    ran_ok: bool
    run_error: str = ""
    registered: bool = True
    videos: int = 0  # published publications of the day's published scripts
    trends: int = 0
    # Rejected topics and scripts, one entry per unit: the rule that fired ('repeat' for a
    # story covered on a nearby day; 'hook' for a script whose hooks stayed under threshold).
    rejected_topics: tuple[str, ...] = ()
    rejected_scripts: tuple[str, ...] = ()
    topics_open: int = 0  # decided neither way, or approved and never scripted
    scripts: Counter[str] = field(default_factory=Counter)  # state -> count, all of the day's
    budget_exhausted: bool = False  # a paid call was refused by the daily cap today
    # Each halted (or halt-failed) script's last reason and when its voice is retried.
    voice_halts: tuple[str, ...] = ()
    accounts: int = 0  # active publishing accounts
    blocked_accounts: tuple[str, ...] = ()  # 'handle (why)' of pending publications' accounts
    no_quota_accounts: tuple[str, ...] = ()  # handles whose publication waits for quota
    # Until when an interrupted upload of its waits (another holder's lease, a gone session's
    # second search), while that is still ahead; None when nothing waits.
    waits_until: datetime | None = None
    waits_for: str = "an interrupted upload"  # what it waits for, in a user's words


@dataclass(frozen=True)
class Verdict:
    reason: str
    expected: bool  # True: nothing to publish by the dimension's own rules; exit 0
    waiting: bool = False  # True: the work waits for a time it names; nothing to fix


HOOK = "hook"
REPEAT = "repeat"


def _rejections(topics: tuple[str, ...], scripts: tuple[str, ...]) -> str:
    safety = Counter(r for r in topics if r not in (HOOK, REPEAT))
    safety.update(scripts)
    parts = []
    if safety:
        rules = ", ".join(f"{rule} x{n}" if n > 1 else rule for rule, n in sorted(safety.items()))
        parts.append(f"{sum(safety.values())} by safety ({rules})")
    if hooks := topics.count(HOOK):
        parts.append(f"{hooks} by hook score (every hook under the threshold)")
    if repeats := topics.count(REPEAT):
        parts.append(f"{repeats} as repeats of a story covered on a nearby day")
    return "; ".join(parts)


def unpublished_reason(facts: PartitionFacts) -> Verdict:
    """Why `facts`' partition published no video. Faults first (they explain the rest: a failed
    stage leaves later work undone; a voice HALT, which fails its step, before the bare
    error), then holds, then the rules' own rejections."""
    if not facts.registered:
        return Verdict("the dimension is not registered in the database", False)
    if facts.voice_halts:  # it fails the voice step too: the halt says more
        return Verdict(
            f"voice HALT on {len(facts.voice_halts)} script(s), every voice provider failed: "
            + facts.voice_halts[0],
            False,
        )
    if not facts.ran_ok:
        return Verdict(f"a stage failed: {facts.run_error or 'run failed'}", False)
    if facts.budget_exhausted:
        return Verdict(
            "the daily budget cap (daily_budget_usd) refused a paid call today; "
            "the rest waits for tomorrow's budget or a higher cap",
            False,
        )
    if facts.waits_until is not None:
        return Verdict(waiting_words(facts.waits_until, facts.waits_for), False, waiting=True)
    if facts.blocked_accounts:
        return Verdict(
            f"account skipped: {', '.join(facts.blocked_accounts)} may not be published to now",
            False,
        )
    if facts.no_quota_accounts:
        return Verdict(
            f"upload quota used up for {', '.join(facts.no_quota_accounts)} "
            "(the rest publishes once the quota resets)",
            False,
        )
    if facts.accounts == 0 and facts.scripts.get("published"):
        return Verdict("no active publishing account in the dimension's YAML", False)
    waiting = {s: n for s, n in facts.scripts.items() if s not in ("published", "rejected")}
    if waiting:
        states = ", ".join(f"{n} {s}" for s, n in sorted(waiting.items()))
        return Verdict(f"scripts not published ({states})", False)
    if facts.rejected_topics or facts.rejected_scripts:
        if facts.topics_open:
            return Verdict(
                f"{facts.topics_open} topic(s) left undecided; rejected: "
                + _rejections(facts.rejected_topics, facts.rejected_scripts),
                False,
            )
        return Verdict(
            "every topic was rejected: "
            + _rejections(facts.rejected_topics, facts.rejected_scripts),
            True,
        )
    if facts.trends == 0:
        return Verdict("no trends today (trend_volume_gate lets an empty day through)", True)
    return Verdict("nothing was published and the database records no reason", False)
