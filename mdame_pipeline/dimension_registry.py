"""dimensions/*.yaml and the registry in PostgreSQL.

Writing the registry is an operator command (`mdame dimensions sync`, and `mdame demo`,
`backfill` and `report`, which sync first): it decides budgets and channels, so it needs the
admin role. The pipeline's sensor only reads: it turns the registered dimensions into partitions
and reports files that differ from what is registered.
"""

from __future__ import annotations

import functools
import json
from collections import defaultdict
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from mdame_core.settings import REPO_ROOT, dimensions_dir
from mdame_core.state import Dimension, StateStore
from mdame_domain.dimensions import DimensionConfig, RegistryReader, load_registry

DIMENSIONS_DIR = REPO_ROOT / "dimensions"  # the checkout's own niches


@dataclass(frozen=True)
class SyncReport:
    active: tuple[str, ...]
    inactive: tuple[str, ...]
    errors: tuple[str, ...]


def sync_registry(state: StateStore, folder: Path | None = None) -> SyncReport:
    """As the admin role (StateStore(role="admin")): upserts every valid file; deactivates
    removed or deactivated dimensions, and accounts removed from a dimension's file or left
    out of its publish_to.

    A malformed file is reported and its dimension keeps its last good state, so a typo does
    not silently stop a running niche (nor start a stopped one), nor its accounts.
    """
    registry = load_registry(folder or dimensions_dir())
    stored = {d.slug: d for d in state.list_dimensions()}
    registered = _registered_accounts(state)
    for dim in registry.dimensions:
        row = stored.get(dim.slug)
        if row is not None and not _differences(dim, row, registered[row.id]):
            continue  # registered as the file says: a sync of unchanged files only reads
        publishing = dim.publishing_accounts()
        # An account left out of the file, or of publish_to, publishes nothing (its grant kept).
        state.register_dimension(
            dim.slug,
            dim.title,
            dim.to_json(),
            dim.active,
            [{**asdict(account), "active": account in publishing} for account in dim.accounts],
        )
    broken = [Path(e.source).stem for e in registry.errors]
    keep_as_is = [s for s in broken if (row := stored.get(s)) is not None and row.active]
    active = tuple(d.slug for d in registry.dimensions if d.active)
    state.set_dimensions_active(list(active) + keep_as_is)
    return SyncReport(
        active=active,
        inactive=tuple(d.slug for d in registry.dimensions if not d.active),
        errors=tuple(str(e) for e in registry.errors),
    )


# An account as registered: (platform, handle) -> (units, quota time zone, daily posts, active).
Registered = dict[tuple[str, str], tuple[int, str, int, bool]]


def _registered_accounts(state: StateStore) -> dict[int, Registered]:
    """Every dimension's accounts, in one read: the sensor compares them every minute."""
    out: dict[int, Registered] = defaultdict(dict)
    for a in state.list_accounts(None):
        out[a.dimension_id][(a.platform, a.handle)] = (
            a.daily_quota_units,
            a.quota_timezone,
            a.daily_posts,
            a.active,
        )
    return out


def _differences(dim: DimensionConfig, row: Dimension, registered: Registered) -> str:
    """What in the file differs from its registration ('' when nothing does): the dimension
    itself, or its accounts (their settings, or which of them publish)."""
    if (row.title, row.config, row.active) != (dim.title, _stored_form(dim), dim.active):
        return "differs from its registration"
    publishing = dim.publishing_accounts()
    wanted = {
        (a.platform, a.handle): (
            a.daily_quota_units,
            a.quota_timezone,
            a.daily_posts,
            a in publishing,
        )
        for a in dim.accounts
    }
    left_out = {key for key, value in registered.items() if key not in wanted and value[3]}
    if left_out or any(registered.get(key) != value for key, value in wanted.items()):
        return "lists other accounts than registered"
    return ""


def _stored_form(dim: DimensionConfig) -> Any:
    """The config as the registry stores it: through JSON, as jsonb keeps it (tuples become
    lists). Kept per config: unchanged files give the same (equal) configs every minute. The
    source is part of the key, since equal configs differ in it and it is stored."""
    return _stored_form_of(dim, dim.source)


@functools.lru_cache(maxsize=65536)
def _stored_form_of(dim: DimensionConfig, source: str) -> Any:
    return json.loads(json.dumps(dim.to_json()))


@dataclass(frozen=True)
class RegistryView:
    active: tuple[str, ...]  # active in the database
    drift: tuple[str, ...]  # what the files say that the database does not, one line each
    errors: tuple[str, ...]  # malformed files


def registry_drift(
    state: StateStore, folder: Path | None = None, files: RegistryReader | None = None
) -> RegistryView:
    """The registered active dimensions, and each file that differs from its registration
    (a new, changed or deactivated dimension, or changed accounts) until an operator syncs.
    `files`: a reader kept between calls, so that unchanged files are not parsed again."""
    where = folder or dimensions_dir()
    registry = (files or RegistryReader()).load(where)
    stored = {d.slug: d for d in state.list_dimensions()}
    registered = _registered_accounts(state)
    fix = "run `mdame dimensions sync`"
    drift: list[str] = []
    for dim in registry.dimensions:
        row = stored.get(dim.slug)
        if row is None:
            drift.append(f"{where.name}/{dim.slug}.yaml is not registered yet: {fix}")
        elif found := _differences(dim, row, registered[row.id]):
            drift.append(f"{where.name}/{dim.slug}.yaml {found}: {fix}")
    present = {d.slug for d in registry.dimensions} | {Path(e.source).stem for e in registry.errors}
    for slug, row in stored.items():
        if row.active and slug not in present:
            drift.append(f"dimension {slug} is active but {where.name}/{slug}.yaml is gone: {fix}")
    return RegistryView(
        active=tuple(slug for slug, row in sorted(stored.items()) if row.active),
        drift=tuple(drift),
        errors=tuple(str(e) for e in registry.errors),
    )
