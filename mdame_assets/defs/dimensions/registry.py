"""Syncs dimensions/*.yaml into PostgreSQL. Plain code: the sensor and `mdame demo` share it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from mdame_core.settings import REPO_ROOT
from mdame_core.state import StateStore
from mdame_domain.dimensions import load_registry

DIMENSIONS_DIR = REPO_ROOT / "dimensions"


@dataclass(frozen=True)
class SyncReport:
    active: tuple[str, ...]
    inactive: tuple[str, ...]
    errors: tuple[str, ...]


def sync_registry(state: StateStore, folder: Path = DIMENSIONS_DIR) -> SyncReport:
    """Upserts every valid file; deactivates removed or deactivated dimensions, and accounts
    removed from a dimension's file.

    A malformed file is reported and its dimension keeps its last good state, so a typo does
    not silently stop a running niche (nor start a stopped one), nor its accounts.
    """
    registry = load_registry(folder)
    for dim in registry.dimensions:
        state.upsert_dimension(dim.slug, dim.title, dim.to_json(), dim.active)
        for account in dim.accounts:
            state.upsert_dimension_account(
                dim.slug,
                account.platform,
                account.handle,
                account.daily_quota_units,
                True,
                account.quota_timezone,
            )
        state.set_dimension_accounts_active(
            dim.slug, [(account.platform, account.handle) for account in dim.accounts]
        )
    broken = [Path(e.source).stem for e in registry.errors]
    keep_as_is = [s for s in broken if (row := state.get_dimension(s)) is not None and row.active]
    active = tuple(d.slug for d in registry.dimensions if d.active)
    state.set_dimensions_active(list(active) + keep_as_is)
    return SyncReport(
        active=active,
        inactive=tuple(d.slug for d in registry.dimensions if not d.active),
        errors=tuple(str(e) for e in registry.errors),
    )
