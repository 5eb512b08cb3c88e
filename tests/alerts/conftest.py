"""Fixtures of the alert tests: the local Telegram Bot API server (tests/telegramkit.py), and
what raises a dimension's alert: its stage, holding the dimension's pipeline lock."""

from collections.abc import Callable

import pytest

from mdame_core.state import Fence, StateStore
from tests.adminkit import as_admin
from tests.telegramkit import telegram_env, telegram_server  # noqa: F401 - fixtures


@pytest.fixture
def stage(state: StateStore) -> Callable[[str], StateStore]:
    """stage(slug): the dimension registered and its pipeline lock held, as a stage that meets
    a cause holds it (a dimension's alert is recorded under that lock)."""
    held: dict[str, StateStore] = {}

    def holding(slug: str) -> StateStore:
        if slug not in held:
            as_admin(state).upsert_dimension(slug, slug.title())
            grant = state.acquire_pipeline_lock(f"pipeline:{slug}", "stage", 600)
            assert grant is not None
            held[slug] = state.fenced(Fence(f"pipeline:{slug}", "stage", grant, 600))
        return held[slug]

    return holding
