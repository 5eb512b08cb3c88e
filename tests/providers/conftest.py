"""Fixtures for the Gemini provider tests: the local Gemini server (fakes.gemini), a
database with the dimensions synced, and the dimension's pipeline lock held (a fenced store).
The real google-genai SDK talks to the server; nothing leaves 127.0.0.1."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes import gemini as fake_gemini
from mdame_core.state import StateStore
from mdame_pipeline.dimension_registry import DIMENSIONS_DIR, sync_registry
from mdame_pipeline.locks import held_lock
from tests.adminkit import as_admin
from tests.providers.gemkit import DIMENSION


@pytest.fixture
def fake() -> Iterator[fake_gemini.FakeGemini]:
    with fake_gemini.running() as server:
        yield server


@pytest.fixture
def db(state: StateStore) -> StateStore:
    sync_registry(as_admin(state), DIMENSIONS_DIR)
    return state


@pytest.fixture
def fenced(db: StateStore) -> Iterator[StateStore]:
    with held_lock(db, DIMENSION, "provider-test") as store:
        yield store
