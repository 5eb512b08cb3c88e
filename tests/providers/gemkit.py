"""Helpers of the Gemini provider tests (fixtures are in conftest.py)."""

from __future__ import annotations

import dataclasses
from typing import Any

import psycopg

from mdame_core.state import StateStore
from mdame_domain.dimensions import DimensionConfig, load_dimension_file
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR
from mdame_resources.providers.budget import CallContext

KEY = "test-key-not-secret"
DIMENSION = "tech"


def dimension(**changes: Any) -> DimensionConfig:
    return dataclasses.replace(load_dimension_file(DIMENSIONS_DIR / f"{DIMENSION}.yaml"), **changes)


def context(store: StateStore, **changes: Any) -> CallContext:
    return CallContext(store, dimension(**changes))


def ledger(owner: psycopg.Connection) -> dict[str, Any]:
    """The budget ledger by state, and every entry matched with its attempt."""
    rows = owner.execute(
        """SELECT l.state, l.reserved_micros, l.actual_micros, a.status
             FROM mdame.budget_ledger l
             LEFT JOIN mdame.provider_attempts a ON a.detail ->> 'budget_key' = l.attempt_key
            ORDER BY l.id"""
    ).fetchall()
    return {
        "rows": rows,
        "reserved": sum(r[1] for r in rows),
        "settled": sum(r[1] for r in rows if r[0] == "settled"),
        "released": sum(r[1] for r in rows if r[0] == "released"),
        "held": sum(r[1] for r in rows if r[0] == "reserved"),
        "spent": sum(r[2] or 0 for r in rows if r[0] == "settled"),
    }


def assert_balanced(owner: psycopg.Connection) -> dict[str, Any]:
    """reserved = settled + released + held, and every entry's state matches its attempt's:
    held <-> submitted/unknown, released <-> failed, settled <-> succeeded/failed."""
    book = ledger(owner)
    assert book["reserved"] == book["settled"] + book["released"] + book["held"]
    allowed = {
        "reserved": {"submitted", "unknown"},
        "released": {"failed"},
        "settled": {"succeeded", "failed"},
    }
    for state, _reserved, _actual, status in book["rows"]:
        assert status in allowed[state], (state, status)
    cap_rows = owner.execute(
        """SELECT c.cap_micros, coalesce(sum(CASE l.state WHEN 'settled' THEN l.actual_micros
                                                        WHEN 'reserved' THEN l.reserved_micros
                                                   END), 0)
             FROM mdame.budget_caps c LEFT JOIN mdame.budget_ledger l USING (scope, period)
            GROUP BY c.scope, c.period, c.cap_micros"""
    ).fetchall()
    for cap, used in cap_rows:
        assert used <= cap
    return book
