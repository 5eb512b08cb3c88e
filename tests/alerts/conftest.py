"""Fixtures of the alert tests: the local Telegram Bot API server (tests/telegramkit.py)."""

from tests.telegramkit import telegram_env, telegram_server  # noqa: F401 - fixtures
