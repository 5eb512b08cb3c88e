"""Operator alerts as plain data: the causes, what each one says, and the dedup day.

An alert names its dimension, its cause and a short reason, and never a secret: reasons come
from our own messages (a StateError's text, a check's description), cut to a few lines, with
any credential a quoted error carries masked (mdame_domain.redaction).
"""

from __future__ import annotations

from datetime import UTC, date, datetime

from mdame_domain.redaction import redact

# Each cause reaches the operator at most once per dimension and UTC day (mdame.alerts).
CAUSES: dict[str, str] = {
    "run_failure": "run failed",
    "halt": "HALT: nothing was published",
    "reauth_needed": "publishing account needs re-authorization",
    "budget_cap": "daily budget cap reached",
    "quota_exhausted": "upload quota exhausted",
    "check_blocked": "a blocking check failed: publication blocked",
    "disk_low": "disk space low",
    "provider_refused": "a provider refused the request: fix the configuration",
}
MAX_REASON = 1500  # characters of reason kept: an alert is a headline, not a log


class UnknownCause(ValueError):
    pass


def require_cause(cause: str) -> str:
    if cause not in CAUSES:
        raise UnknownCause(f"unknown alert cause {cause!r}; one of {', '.join(CAUSES)}")
    return cause


def alert_day(now: datetime | None = None) -> date:
    """The dedup window: the UTC calendar day."""
    moment = now or datetime.now(UTC)
    return moment.astimezone(UTC).date() if moment.tzinfo else moment.date()


def alert_text(dimension: str | None, cause: str, reason: str) -> str:
    """'MD-AME alert · tech · HALT: nothing was published' and the reason under it. The reason is
    redacted: it often quotes an error, whose text may hold a URL with a token."""
    headline = f"MD-AME alert · {dimension or 'all dimensions'} · {CAUSES[require_cause(cause)]}"
    reason = redact(reason.strip())
    if len(reason) > MAX_REASON:
        reason = reason[: MAX_REASON - 1].rstrip() + "…"
    return f"{headline}\n{reason}" if reason else headline
