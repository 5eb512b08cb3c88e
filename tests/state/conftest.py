"""Fixtures the YouTube publishing tests share: the fake channel and the master key."""

from __future__ import annotations

from pathlib import Path

import pytest
from youtube_kit import REFRESH_TOKEN

from fakes.youtube import running
from mdame_domain.credentials import MasterKey


@pytest.fixture
def fake(tmp_path: Path):
    with running(tmp_path / "fake") as server:
        server.add_channel("@tech", REFRESH_TOKEN)
        yield server


@pytest.fixture
def master(monkeypatch: pytest.MonkeyPatch) -> MasterKey:
    key = MasterKey.generate()
    monkeypatch.setenv("MDAME_MASTER_KEY", key.encoded())
    return key
