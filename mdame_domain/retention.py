"""Retention: how long made media is kept, how the home's disk is used, and when it
runs low. Plain functions: the housekeeping asset (mdame_assets/defs/housekeeping) and the
Auditor's report call them; the database decides what is collectable
(sql/functions/retention.sql).

Policy, per dimension (YAML `retention:`) over global defaults (environment):
  render_days  renders and thumbnails kept this many days after their script finished
               (published, rejected or failed); $MDAME_RETENTION_RENDER_DAYS, default 30
  voice_days   voice tracks, likewise; $MDAME_RETENTION_VOICE_DAYS, default 7
Clips are kept while a live scene-cache entry names them (the cache TTL) and while an
unfinished script needs them.

Low disk: free space under the home below $MDAME_DISK_LOW_BYTES (default 5 GiB) or below
$MDAME_DISK_LOW_PERCENT of the filesystem (default 10).

Dagster's runs (with their events and compute logs) are deleted once they are older than
$MDAME_RUN_RETENTION_DAYS (default 30), except the last run of each partition and job (the
partition's materializations and check results live in its events) and any run MD-AME's state
still references (select_runs_to_delete).
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from mdame_core import settings

RENDER_DAYS_ENV = "MDAME_RETENTION_RENDER_DAYS"
VOICE_DAYS_ENV = "MDAME_RETENTION_VOICE_DAYS"
DISK_LOW_BYTES_ENV = "MDAME_DISK_LOW_BYTES"
DISK_LOW_PERCENT_ENV = "MDAME_DISK_LOW_PERCENT"
RUN_DAYS_ENV = "MDAME_RUN_RETENTION_DAYS"
RUN_HISTORY_DAYS_ENV = "MDAME_RUN_HISTORY_DAYS"
DEFAULT_RUN_DAYS: int = settings.default(RUN_DAYS_ENV)
DEFAULT_RENDER_DAYS: int = settings.default(RENDER_DAYS_ENV)
DEFAULT_VOICE_DAYS: int = settings.default(VOICE_DAYS_ENV)
DEFAULT_DISK_LOW_BYTES: int = settings.default(DISK_LOW_BYTES_ENV)
DEFAULT_DISK_LOW_PERCENT: float = settings.default(DISK_LOW_PERCENT_ENV)
MAX_DAYS = 3650  # as the database checks (mdame._retention_days)

# disk_usage_by_kind's keys, in report order.
MEDIA_KINDS = ("clips", "voice", "renders", "thumbnails", "other")
USAGE_KEYS = (
    *(f"media_{kind}" for kind in MEDIA_KINDS),
    "media_cache",
    "outbox",
    "scratch",
    "dagster_storage",
    "free",
)


class RetentionConfigError(ValueError):
    """A retention setting (environment variable) is not usable; names the variable."""


@dataclass(frozen=True)
class RetentionSettings:
    """A dimension's `retention:` block; None: the global default ($MDAME_RETENTION_*)."""

    render_days: int | None = None
    voice_days: int | None = None

    def to_json(self) -> dict[str, int]:
        return {
            name: value
            for name, value in (("render_days", self.render_days), ("voice_days", self.voice_days))
            if value is not None
        }


def check_days(name: str, value: Any) -> int:
    """A whole number of days from 0 to MAX_DAYS; ValueError naming `name` otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DAYS:
        raise ValueError(f"{name} must be a whole number of days from 0 to {MAX_DAYS}: {value!r}")
    return value


def _env_int(name: str, env: Mapping[str, str] | None) -> int:
    try:
        return int(settings.get(name, env))
    except settings.SettingsError as exc:
        raise RetentionConfigError(str(exc)) from None


@dataclass(frozen=True)
class RetentionPolicy:
    """The policy the database applies: defaults plus per-dimension overrides."""

    render_days: int = DEFAULT_RENDER_DAYS
    voice_days: int = DEFAULT_VOICE_DAYS
    dimensions: Mapping[str, RetentionSettings] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """The `p_policy` argument of mdame.collectable_media / begin_media_collection."""
        return {
            "render_days": self.render_days,
            "voice_days": self.voice_days,
            "dimensions": {
                slug: settings.to_json()
                for slug, settings in sorted(self.dimensions.items())
                if settings.to_json()
            },
        }


def retention_policy(
    dimensions: Iterable[tuple[str, RetentionSettings]], env: Mapping[str, str] | None = None
) -> RetentionPolicy:
    """The policy from the environment's defaults and each dimension's `retention:` block."""
    return RetentionPolicy(
        render_days=_env_int(RENDER_DAYS_ENV, env),
        voice_days=_env_int(VOICE_DAYS_ENV, env),
        dimensions=dict(dimensions),
    )


# -- Dagster runs ---------------------------------------------------------------------------
def run_retention_days(env: Mapping[str, str] | None = None) -> int:
    """$MDAME_RUN_RETENTION_DAYS: from 1 (a run finished today is never deleted) to MAX_DAYS."""
    return _env_int(RUN_DAYS_ENV, env)


def run_history_days(env: Mapping[str, str] | None = None) -> int:
    """$MDAME_RUN_HISTORY_DAYS: how long a partition's last run of a job is kept. At least the
    retention: a run younger than that is never deleted."""
    days, retention = _env_int(RUN_HISTORY_DAYS_ENV, env), run_retention_days(env)
    if days < retention:
        raise RetentionConfigError(
            f"{RUN_HISTORY_DAYS_ENV}={days} is shorter than {RUN_DAYS_ENV}={retention}: a "
            "partition's last run is kept at least as long as any run"
        )
    return days


@dataclass(frozen=True)
class RunSummary:
    """A finished Dagster run, as retention needs it. `partition` is None for an
    unpartitioned run (its job's runs form one group)."""

    run_id: str
    job: str
    partition: str | None
    created: datetime


@dataclass
class RunSelection:
    delete: list[RunSummary] = field(default_factory=list)
    kept_last: list[RunSummary] = field(default_factory=list)  # last of its partition and job
    expired_last: list[RunSummary] = field(default_factory=list)  # ...older than the history
    kept_referenced: list[RunSummary] = field(default_factory=list)  # named by MD-AME's state


def select_runs_to_delete(
    old: Sequence[RunSummary],
    groups_with_newer_runs: set[tuple[str, str | None]],
    referenced: set[str],
    history_cutoff: datetime | None = None,
) -> RunSelection:
    """Of the finished runs older than the retention (`old`), those to delete: all but the
    newest of each (job, partition), and that one too when the group has a run newer than the
    retention (`groups_with_newer_runs`, any status) or, for a partition's, when it was created
    before `history_cutoff`; never a run in `referenced`. The newest run of an unpartitioned job
    is one per job, so it stays."""
    newest: dict[tuple[str, str | None], RunSummary] = {}
    for run in old:
        key = (run.job, run.partition)
        if key not in newest or (run.created, run.run_id) > (
            newest[key].created,
            newest[key].run_id,
        ):
            newest[key] = run
    selection = RunSelection()
    for run in sorted(old, key=lambda r: (r.created, r.run_id)):
        key = (run.job, run.partition)
        if run.run_id in referenced:
            selection.kept_referenced.append(run)
        elif newest[key] is run and key not in groups_with_newer_runs:
            expired = (
                history_cutoff is not None
                and run.partition is not None
                and run.created < history_cutoff
            )
            if not expired:
                selection.kept_last.append(run)
                continue
            selection.expired_last.append(run)
            selection.delete.append(run)
        else:
            selection.delete.append(run)
    return selection


# -- disk ----------------------------------------------------------------------------------
@dataclass(frozen=True)
class DiskThreshold:
    low_bytes: int = DEFAULT_DISK_LOW_BYTES
    low_percent: float = DEFAULT_DISK_LOW_PERCENT

    def problem(self, free: int, total: int) -> str | None:
        """Why `free` of `total` bytes is too little, or None."""
        percent = 100.0 * free / total if total else 100.0
        if free < self.low_bytes or percent < self.low_percent:
            return (
                f"{free / 1024**3:.1f} GiB free ({percent:.1f} % of {total / 1024**3:.1f} GiB); "
                f"alert below {self.low_bytes / 1024**3:.1f} GiB or {self.low_percent:g} %"
            )
        return None


def disk_threshold(env: Mapping[str, str] | None = None) -> DiskThreshold:
    try:
        return DiskThreshold(
            settings.get(DISK_LOW_BYTES_ENV, env), settings.get(DISK_LOW_PERCENT_ENV, env)
        )
    except settings.SettingsError as exc:
        raise RetentionConfigError(str(exc)) from None


def disk_low(home: Path, threshold: DiskThreshold | None = None) -> str | None:
    """Why free space under `home` is too low, or None."""
    usage = shutil.disk_usage(_existing(Path(home)))
    return (threshold or disk_threshold()).problem(usage.free, usage.total)


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _walk_files(root: Path) -> Iterable[tuple[Path, os.stat_result]]:
    if not root.is_dir():
        return
    for folder, _dirs, files in os.walk(root):
        for name in files:
            path = Path(folder) / name
            try:
                yield path, path.lstat()
            except OSError:  # removed while we walked
                continue


def _derived_names(media_root: Path, kind: str) -> set[str]:
    """File names (<sha><suffix>) of stored outputs that derived-output memos of `kind` name."""
    names: set[str] = set()
    for path, _ in _walk_files(media_root / "derived" / kind):
        try:
            uri = path.read_text(encoding="utf-8").strip()
        except OSError:
            continue
        names.add(uri.rsplit("/", 1)[-1])
    return names


def disk_usage_by_kind(home: Path, media_root: Path | None = None) -> dict[str, int]:
    """Bytes on disk under an MD-AME home, by kind (keys: USAGE_KEYS):

    media_clips / media_voice / media_renders / media_thumbnails / media_other: the local media
    store (`media_root`, default home/media). The store is content-addressed, so the kind is
    read from the name: renders and thumbnails are what their derived-output memos name,
    voice tracks are .wav, other .mp4 are clips, everything else (memos, partial files) other.
    media_cache: a remote store's local copies (home/media-cache). outbox: home/outbox,
    counting only bytes not already counted (its videos are hard links to the store's files).
    scratch: home/scratch. dagster_storage: home/dagster. free: free bytes on the home's
    filesystem (for people and for the low-disk alert)."""
    home = Path(home)
    media_root = Path(media_root) if media_root is not None else home / "media"
    usage = dict.fromkeys(USAGE_KEYS, 0)
    seen: set[tuple[int, int]] = set()  # (device, inode): a hard-linked file counts once

    def add(key: str, stat: os.stat_result) -> None:
        ident = (stat.st_dev, stat.st_ino)
        if ident in seen:
            return
        seen.add(ident)
        usage[key] += stat.st_size

    renders = _derived_names(media_root, "render")
    thumbnails = _derived_names(media_root, "thumbnail")
    for path, stat in _walk_files(media_root):
        name = path.name
        if name in renders:
            kind = "renders"
        elif name in thumbnails:
            kind = "thumbnails"
        elif name.endswith(".wav") and not name.startswith("."):
            kind = "voice"
        elif name.endswith(".mp4") and not name.startswith("."):
            kind = "clips"
        else:
            kind = "other"
        add(f"media_{kind}", stat)
    for key, folder in (
        ("media_cache", home / "media-cache"),
        ("outbox", home / "outbox"),
        ("scratch", home / "scratch"),
        ("dagster_storage", home / "dagster"),
    ):
        for _, stat in _walk_files(folder):
            add(key, stat)
    usage["free"] = shutil.disk_usage(_existing(home)).free
    return usage
