"""Every stage is partitioned by day x dimension; keys look like `2026-11-29|tech`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import dagster as dg

DIMENSION_PARTITION = "dimension"
dimension_partitions = dg.DynamicPartitionsDefinition(name=DIMENSION_PARTITION)
# end_offset=1: today is a partition (the schedule publishes today's videos, not yesterday's).
daily_partitions = dg.DailyPartitionsDefinition(
    start_date="2026-11-01", timezone="UTC", end_offset=1
)
content_partitions = dg.MultiPartitionsDefinition(
    {"date": daily_partitions, DIMENSION_PARTITION: dimension_partitions}
)


@dataclass(frozen=True)
class PartitionRef:
    day: date
    dimension: str

    @property
    def key(self) -> str:
        return partition_key(self.day, self.dimension)

    @property
    def as_of(self) -> datetime:
        """The partition's fixed 'now' (end of its day): scoring stays deterministic on re-runs."""
        return datetime.combine(self.day + timedelta(days=1), time.min, tzinfo=UTC)

    @classmethod
    def parse(cls, key: str) -> PartitionRef:
        # Multi-partition keys join the dimension names' keys in sorted order: date|dimension.
        day, sep, dimension = str(key).partition("|")
        try:
            if not sep or not dimension:
                raise ValueError("missing '|'")
            return cls(date.fromisoformat(day), dimension)
        except ValueError as exc:
            raise ValueError(f"partition key {key!r} is not YYYY-MM-DD|dimension") from exc

    @classmethod
    def of(
        cls,
        context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext | dg.OpExecutionContext,
    ) -> PartitionRef:
        """A run's partition, by dimension name (Dagster's MultiPartitionKey), not by splitting
        the key's string: the dimensions' order in it is Dagster's to choose."""
        key = context.partition_key
        if not isinstance(key, dg.MultiPartitionKey):
            key = content_partitions.get_partition_key_from_str(str(key))
        keys = key.keys_by_dimension
        try:
            return cls(date.fromisoformat(keys["date"]), keys[DIMENSION_PARTITION])
        except (KeyError, ValueError) as exc:
            raise ValueError(f"partition key {str(key)!r} is not YYYY-MM-DD|dimension") from exc


def partition_key(day: date, dimension: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({"date": day.isoformat(), DIMENSION_PARTITION: dimension})
