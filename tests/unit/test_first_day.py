"""MDAME_FIRST_DAY: the first day partition (and with it the first week) is a setting, read when
the partitions are defined; unset, the definitions are the ones the project always had."""

from __future__ import annotations

import subprocess
import sys
from datetime import date

import pytest

from mdame_assets.partitions import (
    daily_partitions_from,
    first_day_setting,
    first_monday,
    weekly_partitions_from,
)
from mdame_core import settings
from mdame_core.settings import REPO_ROOT, SettingsError
from tests.childenv import child_environ

DEFAULT = date(2026, 11, 1)
REFUSED = "is not allowed: it takes a date YYYY-MM-DD"


def test_the_first_day_is_an_iso_date_setting(monkeypatch):
    assert settings.default("MDAME_FIRST_DAY") == DEFAULT
    monkeypatch.delenv("MDAME_FIRST_DAY", raising=False)
    assert settings.get("MDAME_FIRST_DAY") == DEFAULT
    monkeypatch.setenv("MDAME_FIRST_DAY", "")
    assert settings.get("MDAME_FIRST_DAY") == DEFAULT
    monkeypatch.setenv("MDAME_FIRST_DAY", "2026-11-18")
    assert settings.get("MDAME_FIRST_DAY") == date(2026, 11, 18)
    # The reader strips the value, so " 2026-11-18" is that day; these are not days.
    for bad in ("2026-02-30", "18/11/2026", "20261118", "2026-W47-3", "tomorrow"):
        monkeypatch.setenv("MDAME_FIRST_DAY", bad)
        with pytest.raises(SettingsError) as refused:
            settings.get("MDAME_FIRST_DAY")
        assert str(refused.value) == f"MDAME_FIRST_DAY={bad!r} {REFUSED}"


def test_the_first_week_is_the_first_monday_on_or_after_the_first_day():
    assert first_monday(date(2026, 11, 1)) == date(2026, 11, 2)  # a Sunday
    assert first_monday(date(2026, 11, 2)) == date(2026, 11, 2)  # a Monday
    assert first_monday(date(2026, 11, 3)) == date(2026, 11, 9)
    for offset in range(14):
        day = date.fromordinal(DEFAULT.toordinal() + offset)
        monday = first_monday(day)
        assert monday.weekday() == 0 and 0 <= (monday - day).days < 7


def test_the_partitions_start_on_the_first_day():
    daily = daily_partitions_from(date(2026, 11, 18))
    assert daily.start.date() == date(2026, 11, 18)
    assert daily.get_first_partition_key() == "2026-11-18"
    weekly = weekly_partitions_from(date(2026, 11, 18))  # a Wednesday
    assert weekly.get_first_partition_key() == "2026-11-23"


def _imported(first_day: str | None) -> subprocess.CompletedProcess[str]:
    """The partitions as a code location builds them: at import, from the environment (the one
    setting still read at import: every partitioned asset is defined with them)."""
    env = child_environ()
    if first_day is not None:
        env["MDAME_FIRST_DAY"] = first_day
    code = (
        "from mdame_assets import partitions as p; "
        "print(p.daily_partitions.get_first_partition_key(), "
        "p.weekly_partitions.get_first_partition_key(), "
        "p.content_partitions.partitions_defs[0].partitions_def is p.daily_partitions)"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**env, "PYTHONPATH": str(REPO_ROOT)},
        cwd=REPO_ROOT,
        timeout=120,
    )


def test_unset_keeps_the_definitions_and_a_value_moves_them():
    default = _imported(None)
    assert default.returncode == 0, default.stderr
    assert default.stdout.split() == ["2026-11-01", "2026-11-02", "True"]
    moved = _imported("2026-11-18")
    assert moved.returncode == 0, moved.stderr
    assert moved.stdout.split() == ["2026-11-18", "2026-11-23", "True"]


def test_a_bad_first_day_is_refused_by_name():
    done = _imported("1/11/2026")
    assert done.returncode != 0
    assert f"MDAME_FIRST_DAY='1/11/2026' {REFUSED}" in done.stderr


def test_a_first_day_after_today_is_refused_by_name():
    assert first_day_setting(date(2026, 11, 18)) == DEFAULT
    done = _imported("2999-01-01")
    assert done.returncode != 0
    assert "MDAME_FIRST_DAY must not be after today" in done.stderr
