"""The local Telegram Bot API server (fakes/telegram.py) as pytest fixtures.

Use them from a conftest.py or a test module:

    from tests.telegramkit import telegram_env, telegram_server  # noqa: F401 - fixtures

`telegram_server` is a running fakes.telegram.TelegramServer on a free 127.0.0.1 port, fresh
for each test (starting one costs about a millisecond). `telegram_env` also points the
MDAME_TELEGRAM_* variables at it (API URL, the fake's token, global chat GLOBAL_CHAT), so a
TelegramNotifier() with no arguments talks to it.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from fakes.telegram import DEFAULT_TOKEN, TelegramServer

TOKEN = DEFAULT_TOKEN  # a dummy: "123456789:test-token-not-secret"
GLOBAL_CHAT = "-1000000000001"


@pytest.fixture
def telegram_server() -> Iterator[TelegramServer]:
    with TelegramServer(TOKEN) as server:
        yield server


@pytest.fixture
def telegram_env(
    telegram_server: TelegramServer, monkeypatch: pytest.MonkeyPatch
) -> TelegramServer:
    monkeypatch.setenv("MDAME_TELEGRAM_API_URL", telegram_server.base_url)
    monkeypatch.setenv("MDAME_TELEGRAM_BOT_TOKEN", TOKEN)
    monkeypatch.setenv("MDAME_TELEGRAM_CHAT_ID", GLOBAL_CHAT)
    return telegram_server
