"""The keys of the partitions: day x dimension (`2026-11-29|tech`) and week x dimension. Plain
keys only; the partitions definitions built on them are mdame_assets.partitions."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta

import dagster as dg

DIMENSION_PARTITION = "dimension"
DATE_PARTITION = "date"
WEEK_PARTITION = "week"
# Dagster joins a multi-partition key's dimension keys in its dimensions' name order.
KEY_DELIMITER = "|"


def content_key_from_str(value: str) -> dg.MultiPartitionKey:
    """`YYYY-MM-DD|dimension` as the day x dimension partitions' key, as their definition
    (mdame_assets.partitions.content_partitions) reads it: date first, by name order."""
    keys = value.split(KEY_DELIMITER)
    if len(keys) != 2:
        raise ValueError(f"partition key {value!r} is not YYYY-MM-DD|dimension")
    return dg.MultiPartitionKey({DATE_PARTITION: keys[0], DIMENSION_PARTITION: keys[1]})


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
            key = content_key_from_str(str(key))
        keys = key.keys_by_dimension
        try:
            return cls(date.fromisoformat(keys[DATE_PARTITION]), keys[DIMENSION_PARTITION])
        except (KeyError, ValueError) as exc:
            raise ValueError(f"partition key {str(key)!r} is not YYYY-MM-DD|dimension") from exc


def partition_key(day: date, dimension: str) -> dg.MultiPartitionKey:
    return dg.MultiPartitionKey({DATE_PARTITION: day.isoformat(), DIMENSION_PARTITION: dimension})


def week_partition_key(week_start: date, dimension: str) -> dg.MultiPartitionKey:
    """The weekly operations assets' key of a week (its Monday) and a dimension."""
    return dg.MultiPartitionKey(
        {WEEK_PARTITION: week_start.isoformat(), DIMENSION_PARTITION: dimension}
    )
