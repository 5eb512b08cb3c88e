"""A paid call's budget cap is the registry's: the pipeline's role can name it (to learn that its
copy is stale) but cannot raise it, nor set one for a dimension whose file has none."""

from __future__ import annotations

import pytest

from mdame_core.state import InvalidInput
from tests.adminkit import as_admin
from tests.state.test_fencing import hold


def test_the_app_cannot_raise_a_dimensions_budget_cap(state, owner) -> None:
    as_admin(state).upsert_dimension("tech", "Tech", {"daily_budget_micros": 1_000})
    held = hold(state, "tech")
    with pytest.raises(InvalidInput, match=r"daily_cap_micros 1000000000 is not dimension tech"):
        held.begin_paid_call("tech", "w1", "gemini:m", "h", 10, 1_000_000_000, 3, 0)
    assert owner.execute("SELECT count(*) FROM mdame.budget_caps").fetchone() == (0,)
    assert owner.execute("SELECT count(*) FROM mdame.provider_attempts").fetchone() == (0,)

    start = held.begin_paid_call("tech", "w1", "gemini:m", "h", 10, None, 3, 0)  # the registry's
    assert start.action == "submit"
    (cap,) = owner.execute("SELECT cap_micros FROM mdame.budget_caps").fetchone()
    assert cap == 1_000


def test_a_dimension_without_a_registered_cap_gets_none_from_the_caller(state) -> None:
    as_admin(state).upsert_dimension("tech", "Tech")
    held = hold(state, "tech")
    with pytest.raises(InvalidInput, match="registered cap \\(none\\)"):
        held.begin_paid_call("tech", "w1", "gemini:m", "h", 10, 5_000, 3, 0)
