"""One dimension's weekly Adaptive Engine pass: propose bounded
changes from the week's Auditor metrics and write them as a new versioned parameter set.

Plain functions over the state store, so the asset stays thin and tests run without Dagster.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from mdame_core.state import StateStore
from mdame_domain.adaptive import Change, apply_changes, propose_changes
from mdame_domain.dimensions import DimensionConfig


@dataclass(frozen=True)
class EngineOutcome:
    dimension: str
    week_start: date
    changes: tuple[Change, ...]
    version: int  # the version written (or found, on a re-run); the current one when no change
    created: bool
    effective_from: date | None
    markdown: str  # the explanation: asset metadata, the week's report, the notifier


def effective_from(week_start: date, today: date) -> date:
    """The first day whose runs read the week's set: the day after the week (the Auditor's
    weeks run Monday to Sunday, the engine runs that Sunday), never a day already started."""
    return max(week_start + timedelta(days=7), today + timedelta(days=1))


def run_engine(
    state: StateStore,
    config: DimensionConfig,
    week_start: date,
    metrics: dict[str, Any],
    today: date,
) -> EngineOutcome:
    """Proposes the week's changes from `metrics` against the set in force and writes them
    (apply_param_set: one change a week, a re-run returns the same version). `state` is a
    fenced view holding the dimension's pipeline lock."""
    slug = config.slug
    current_set = state.current_param_set(slug)
    version = current_set.version if current_set else 0
    current = config.tuned(current_set.params if current_set else None, version)
    existing = next((s for s in state.param_sets(slug) if s.week_start == week_start), None)
    if existing is not None:
        # Already decided for this week (a re-run, or rolled back by an operator since):
        # the decision stands; proposing again from the newer set would be a second change.
        changes = tuple(Change(**c) for c in existing.changes)
        note = " (rolled back since)" if existing.rolled_back_at else ""
        text = _markdown(slug, week_start, changes, existing.version, existing.effective_from)
        return EngineOutcome(
            slug,
            week_start,
            changes,
            existing.version,
            False,
            existing.effective_from,
            text + note,
        )
    changes = tuple(propose_changes(metrics, current, config.adaptive))
    if not changes:
        text = _markdown(slug, week_start, changes, version, None)
        return EngineOutcome(slug, week_start, changes, version, False, None, text)
    start = effective_from(week_start, today)
    text = _markdown(slug, week_start, changes, version + 1, start)
    # The database holds the set to the limits the dimension was registered with, which are
    # config.adaptive when `config` is the registered config (as the asset reads it).
    new_version, created = state.apply_param_set(
        slug,
        week_start,
        start,
        apply_changes(current, changes),
        [c.__dict__ for c in changes],
        text,
    )
    text = _markdown(slug, week_start, changes, new_version, start)
    return EngineOutcome(slug, week_start, changes, new_version, created, start, text)


REPORT_MARKER = "### Adaptive Engine:"


def explain_in_report(state: StateStore, outcome: EngineOutcome) -> bool:
    """Appends the explanation to the week's Auditor report (store_report; the report keeps
    its metrics and images). Once: a report that already holds a section of the engine is left
    alone, so re-runs do not repeat it. False when there is no report of that week."""
    report = state.get_report(outcome.dimension, outcome.week_start)
    if report is None:
        return False
    if REPORT_MARKER in report.markdown:
        return True
    state.store_report(
        outcome.dimension,
        outcome.week_start,
        report.metrics,
        f"{report.markdown.rstrip()}\n\n{outcome.markdown}\n",
        report.images,
    )
    return True


def _markdown(
    slug: str, week_start: date, changes: tuple[Change, ...], version: int, start: date | None
) -> str:
    head = f"{REPORT_MARKER} {slug}, week of {week_start}"
    if not changes:
        return f"{head}\n\nNo change: the week's metrics call for none (parameter set v{version})."
    lines = [head, "", f"Parameter set v{version}, read from {start} on:", ""]
    lines += [f"- {c.explanation}" for c in changes]
    lines += ["", f"Undo with `mdame params rollback {slug}`."]
    return "\n".join(lines)
