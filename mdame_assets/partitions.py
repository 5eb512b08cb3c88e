"""Every stage is partitioned by day x dimension; keys look like `2026-11-29|tech`
(mdame_runtime.partition_keys)."""

from __future__ import annotations

import warnings
from datetime import UTC, date, datetime, timedelta

import dagster as dg

from mdame_core import settings
from mdame_core.settings import SettingsError
from mdame_runtime.partition_keys import DATE_PARTITION, DIMENSION_PARTITION, WEEK_PARTITION

dimension_partitions = dg.DynamicPartitionsDefinition(name=DIMENSION_PARTITION)

# The first day partition: a deployment that starts later shows no days before its own start.
FIRST_DAY_ENV = "MDAME_FIRST_DAY"


def first_monday(day: date) -> date:
    """The first Monday on or after `day`: the first week whose seven days are all partitions."""
    return day + timedelta(days=-day.weekday() % 7)


def daily_partitions_from(first_day: date) -> dg.DailyPartitionsDefinition:
    # end_offset=1: today is a partition (the schedule publishes today's videos, not yesterday's).
    return dg.DailyPartitionsDefinition(
        start_date=first_day.isoformat(), timezone="UTC", end_offset=1
    )


def weekly_partitions_from(first_day: date) -> dg.WeeklyPartitionsDefinition:
    """Weeks run Monday 00:00 to Sunday 24:00 UTC and are keyed by their Monday; end_offset=1
    makes the running week a partition, so the Sunday schedule can report it before it ends.
    The first week starts on the first Monday on or after the first day, so a week never reads
    day partitions that do not exist."""
    return dg.WeeklyPartitionsDefinition(
        start_date=first_monday(first_day).isoformat(), day_offset=1, timezone="UTC", end_offset=1
    )


def first_day_setting(today: date | None = None) -> date:
    """MDAME_FIRST_DAY, never after today (UTC): a later first day leaves no partition for the
    schedule to run."""
    first: date = settings.get(FIRST_DAY_ENV)
    today = today or datetime.now(UTC).date()
    if first > today:
        raise SettingsError(
            f"{FIRST_DAY_ENV} must not be after today ({today.isoformat()}), got "
            f"{first.isoformat()}: no day would be a partition yet"
        )
    return first


# The one setting read as this module is imported, not as a location loads: every partitioned
# asset of both locations is defined at import with these partitions (a Dagster partitions
# definition holds its start date), so moving this read to load time would mean building every
# asset there. A bad value still stops the import with the variable's name.
FIRST_DAY = first_day_setting()
daily_partitions = daily_partitions_from(FIRST_DAY)
content_partitions = dg.MultiPartitionsDefinition(
    {DATE_PARTITION: daily_partitions, DIMENSION_PARTITION: dimension_partitions}
)

# The weekly operations assets (Strategic Auditor, Adaptive Engine).
weekly_partitions = weekly_partitions_from(FIRST_DAY)
weekly_dimension_partitions = dg.MultiPartitionsDefinition(
    {WEEK_PARTITION: weekly_partitions, DIMENSION_PARTITION: dimension_partitions}
)
with warnings.catch_warnings():  # MultiPartitionMapping is marked beta; the mapping is plain
    warnings.simplefilter("ignore")
    # A week x dimension partition reads the seven day x dimension partitions of that week.
    days_of_week = dg.MultiPartitionMapping(
        {
            DATE_PARTITION: dg.DimensionPartitionMapping(
                WEEK_PARTITION, dg.TimeWindowPartitionMapping()
            ),
            DIMENSION_PARTITION: dg.DimensionPartitionMapping(
                DIMENSION_PARTITION, dg.IdentityPartitionMapping()
            ),
        }
    )


def week_of(
    context: dg.AssetExecutionContext | dg.OpExecutionContext,
) -> tuple[date, str]:
    """A weekly run's (Monday, dimension)."""
    key = context.partition_key
    if not isinstance(key, dg.MultiPartitionKey):
        key = weekly_dimension_partitions.get_partition_key_from_str(str(key))
    keys = key.keys_by_dimension
    try:
        return date.fromisoformat(keys[WEEK_PARTITION]), keys[DIMENSION_PARTITION]
    except (KeyError, ValueError) as exc:
        raise ValueError(f"partition key {str(key)!r} is not a week x dimension key") from exc
