"""Fixtures of the crash-harness tests."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def chaos_media(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One media store for every harness of the session: clips, renders and render analyses
    made by one harness's clean run are reused by the next (they are pure functions of their
    inputs), so a second harness does not pay for the media again."""
    return tmp_path_factory.mktemp("chaos-media")
