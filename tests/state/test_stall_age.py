"""The recovery pass judges a script's stall age by the database's clock, not the host's.

updated_at is written with the database's now(), so the age must be measured with it too. Here
the host's clock, as the product's code reads it (`datetime` in every loaded mdame module), runs
two hours off the database's: ahead, a script a run is working on right now must be left alone;
behind, a script the database last changed an hour ago must still be found stalled.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime, timedelta, tzinfo
from typing import Any

import psycopg
import pytest

from mdame_core.state import StateStore
from mdame_pipeline.recovery import STALL_AFTER_S, recover_dimension_locked
from tests.faults.faultkit import seed_dimension, seed_script, seeding

SKEW = timedelta(hours=2)
_REAL = datetime


class _AnyDatetime(type):
    """isinstance and issubclass see real datetimes as the skewed class's, as code expects."""

    def __instancecheck__(cls, obj: object) -> bool:
        return isinstance(obj, _REAL)

    def __subclasscheck__(cls, sub: type) -> bool:
        return issubclass(sub, _REAL)


def _skewed(offset: timedelta) -> type:
    class Skewed(_REAL, metaclass=_AnyDatetime):
        @classmethod
        def now(cls, tz: tzinfo | None = None) -> Any:
            return _REAL.now(tz) + offset

        @classmethod
        def utcnow(cls) -> Any:
            return _REAL.utcnow() + offset

        @classmethod
        def today(cls) -> Any:
            return _REAL.today() + offset

    return Skewed


@pytest.fixture
def host_clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[timedelta], None]:
    """host_clock(offset): the host's wall clock, as every loaded mdame module reads it, runs
    `offset` off the real (and the database's) one until the test ends."""

    def skew(offset: timedelta) -> None:
        skewed = _skewed(offset)
        for name, module in list(sys.modules.items()):
            if name.split(".")[0].startswith("mdame_") and vars(module).get("datetime") is _REAL:
                monkeypatch.setattr(module, "datetime", skewed)

    return skew


def _script(state: StateStore, name: str) -> int:
    dimension, _ = seed_dimension(state)
    with seeding(state) as fenced:
        return seed_script(fenced, dimension, name, "voice_queued")


def test_a_host_clock_ahead_does_not_stall_live_work(state: StateStore, host_clock: Any) -> None:
    script = _script(state, "live")  # a run is voicing it right now
    host_clock(SKEW)
    report = recover_dimension_locked(state, "science", stall_after_s=STALL_AFTER_S)
    assert report.retried == [] and report.failed == []
    unit = state.get_work_unit("script", script)
    assert unit is not None and (unit.state, unit.attempts) == ("voice_queued", 0)


def test_a_host_clock_behind_still_finds_stalled_work(
    state: StateStore, owner: psycopg.Connection, host_clock: Any
) -> None:
    script = _script(state, "crashed")
    # Last changed an hour ago by the database's clock: a run crashed there.
    owner.execute(
        "UPDATE mdame.scripts SET updated_at = now() - interval '1 hour' WHERE id = %s", [script]
    )
    host_clock(-SKEW)
    report = recover_dimension_locked(state, "science", stall_after_s=STALL_AFTER_S)
    assert report.retried == [script]
    unit = state.get_work_unit("script", script)
    assert unit is not None and (unit.state, unit.attempts) == ("voice_queued", 1)
