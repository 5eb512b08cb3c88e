"""The notifiers against the local Telegram Bot API server, through the real httpx client."""

from __future__ import annotations

import logging
import struct
import time
import zlib
from pathlib import Path

import httpx
import pytest

from fakes.telegram import TelegramServer
from mdame_domain.telegram_text import MAX_CAPTION, MAX_MESSAGE, cut_caption, split_message
from mdame_resources.notify import (
    NotifyConfigError,
    OutboxNotifier,
    TelegramError,
    TelegramNotifier,
    TelegramUnauthorized,
    read_outbox,
)
from tests.telegramkit import GLOBAL_CHAT, TOKEN


def tiny_png(width: int = 3, height: int = 2) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return (
            struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
        )

    raw = b"".join(b"\x00" + b"\x80\x80\x80" * width for _ in range(height))
    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + chunk(b"IHDR", header)
        + chunk(b"IDAT", zlib.compress(raw))
        + chunk(b"IEND", b"")
    )


def dimensions(tmp_path: Path, **chats: str) -> Path:
    """A registry folder whose dimensions name the given chats (copies of tech.yaml)."""
    import yaml

    from mdame_core.settings import REPO_ROOT

    base = yaml.safe_load((REPO_ROOT / "dimensions" / "tech.yaml").read_text())
    folder = tmp_path / "dimensions"
    folder.mkdir(parents=True)
    for slug, chat in chats.items():
        data = {**base, "slug": slug, "alerts": {"telegram_chat": chat}}
        (folder / f"{slug}.yaml").write_text(yaml.safe_dump(data))
    return folder


def test_send_message_reaches_the_chat_as_json(telegram_env: TelegramServer) -> None:
    TelegramNotifier().send_message(None, "science: HALT, voice chain failed")
    (sent,) = telegram_env.messages
    assert sent.content_type == "json"
    assert sent.fields["chat_id"] == GLOBAL_CHAT
    assert sent.fields["text"] == "science: HALT, voice chain failed"


def test_send_photo_is_a_multipart_upload(telegram_env: TelegramServer) -> None:
    png = tiny_png()
    TelegramNotifier().send_photo(None, png, "x" * 3000)
    (sent,) = telegram_env.photos
    assert sent.content_type == "multipart"
    assert sent.files["photo"][1] == png
    assert len(sent.fields["caption"]) == MAX_CAPTION and sent.fields["caption"].endswith("…")
    assert sent.fields["chat_id"] == GLOBAL_CHAT


def test_the_fake_refuses_what_telegram_refuses(telegram_env: TelegramServer) -> None:
    api = f"{telegram_env.base_url}/bot{TOKEN}"
    too_long = httpx.post(f"{api}/sendMessage", json={"chat_id": 1, "text": "a" * 4097})
    assert too_long.status_code == 400
    assert too_long.json()["description"] == "Bad Request: message is too long"
    caption = httpx.post(
        f"{api}/sendPhoto",
        data={"chat_id": "1", "caption": "c" * 1025},
        files={"photo": ("p.png", tiny_png(), "image/png")},
    )
    assert caption.status_code == 400 and "caption is too long" in caption.json()["description"]
    not_an_image = httpx.post(
        f"{api}/sendPhoto", data={"chat_id": "1"}, files={"photo": ("p.png", b"nope")}
    )
    assert not_an_image.status_code == 400
    wrong = httpx.post(f"{telegram_env.base_url}/bot1:wrong/getMe")
    assert wrong.status_code == 401 and wrong.json() == {
        "ok": False,
        "error_code": 401,
        "description": "Unauthorized",
    }
    assert httpx.get(f"{api}/getMe").json()["result"]["is_bot"] is True


def test_a_429_waits_its_retry_after(telegram_env: TelegramServer) -> None:
    telegram_env.fail_next(1, 429, retry_after=1)
    started = time.monotonic()
    TelegramNotifier().send_message("tech", "budget cap reached")
    assert time.monotonic() - started >= 1.0
    statuses = [r.status for r in telegram_env.requests]
    assert statuses == [429, 200]
    assert telegram_env.requests[1].at - telegram_env.requests[0].at >= 1.0


def test_a_429_past_the_bound_raises(telegram_env: TelegramServer) -> None:
    telegram_env.fail_next(1, 429, retry_after=120)
    with pytest.raises(TelegramError, match="429"):
        TelegramNotifier(max_wait_s=5).send_message(None, "x")
    assert len(telegram_env.requests) == 1  # it did not sleep two minutes to find out


def test_server_errors_are_retried_then_raised(telegram_env: TelegramServer) -> None:
    telegram_env.fail_next(2, 502)
    TelegramNotifier(backoff_s=0.01).send_message(None, "after two 502s")
    assert [r.status for r in telegram_env.requests] == [502, 502, 200]
    telegram_env.set_down(503)
    with pytest.raises(TelegramError, match="503"):
        TelegramNotifier(backoff_s=0.01, server_retries=2).send_message(None, "down")


def test_long_text_is_split_on_lines(telegram_env: TelegramServer) -> None:
    lines = [f"line {i:04d} " + "w" * 80 for i in range(120)]  # about 11,000 characters
    TelegramNotifier().send_message(None, "\n".join(lines))
    texts = [m.fields["text"] for m in telegram_env.messages]
    assert len(texts) == 3
    assert all(len(t) <= MAX_MESSAGE for t in texts)
    assert "\n".join(texts).splitlines() == lines  # every cut fell on a line boundary


def test_split_message_and_cut_caption() -> None:
    assert split_message("short") == ["short"]
    assert split_message("") == []
    assert split_message("a\nbb\nccc", limit=5) == ["a\nbb", "ccc"]
    assert split_message("x" * 10, limit=4) == ["xxxx", "xxxx", "xx"]  # no line: mid-word
    emoji = "😀" * 3000  # two UTF-16 units each, as the Bot API counts
    assert [len(p) for p in split_message(emoji)] == [2048, 952]
    assert cut_caption("ok") == "ok"
    assert len(cut_caption("y" * 2000)) == MAX_CAPTION


def test_chat_per_dimension_with_global_fallback(
    telegram_env: TelegramServer, tmp_path: Path
) -> None:
    folder = dimensions(tmp_path, tech="@mdame_tech_alerts", science="-1002000")
    notifier = TelegramNotifier(dimensions_dir=str(folder))
    notifier.send_message("tech", "a")
    notifier.send_message("science", "b")
    notifier.send_message("cooking", "c")  # no file, so no chat of its own
    notifier.send_message(None, "d")
    chats = [m.fields["chat_id"] for m in telegram_env.messages]
    assert chats == ["@mdame_tech_alerts", "-1002000", GLOBAL_CHAT, GLOBAL_CHAT]


def test_no_chat_at_all_is_a_clear_error(
    telegram_env: TelegramServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MDAME_TELEGRAM_CHAT_ID")
    with pytest.raises(NotifyConfigError, match="MDAME_TELEGRAM_CHAT_ID"):
        TelegramNotifier().send_message("nosuch", "x")
    assert telegram_env.requests == []


def test_the_token_never_shows(
    telegram_env: TelegramServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # httpx logs each URL at INFO; every process quiets it (mdame_core.logs), and one that turns
    # its request lines back on still gets them redacted.
    caplog.set_level(logging.INFO, logger="httpx")
    TelegramNotifier().send_message(None, "logged request")
    wrong = TelegramNotifier(bot_token="999:another-secret-token")
    with pytest.raises(TelegramUnauthorized) as refused:
        wrong.send_message(None, "x")
    telegram_env.stop()  # unreachable: httpx's own error message holds the URL
    with pytest.raises(TelegramError) as unreachable:
        TelegramNotifier(backoff_s=0.01, server_retries=1).send_message(None, "x")
    for exc in (refused.value, unreachable.value):
        text = f"{exc!r} {exc} {exc.__context__!r} {exc.__cause__!r}"
        assert "test-token-not-secret" not in text and "another-secret-token" not in text
    assert "401" in str(refused.value) and "MDAME_TELEGRAM_BOT_TOKEN" in str(refused.value)
    assert "HTTP Request: POST" in caplog.text and "/bot" in caplog.text
    assert "test-token-not-secret" not in caplog.text
    assert "another-secret-token" not in caplog.text


def test_the_outbox_notifier_writes_files(tmp_path: Path) -> None:
    outbox = OutboxNotifier(root=str(tmp_path))
    outbox.send_message("tech", "z" * 5000)
    outbox.send_message(None, "global")
    outbox.send_photo("tech", tiny_png(), "weekly plot")
    lines = read_outbox(tmp_path, "tech")
    assert [line["method"] for line in lines] == ["sendMessage", "sendMessage", "sendPhoto"]
    assert [len(line["text"]) for line in lines[:2]] == [4096, 904]
    assert (tmp_path / "telegram" / lines[2]["photo"]).read_bytes() == tiny_png()
    assert read_outbox(tmp_path, None)[0]["text"] == "global"


def test_the_alerts_block_is_validated(tmp_path: Path) -> None:
    from mdame_domain.dimensions import DimensionConfigError, load_dimension_file

    folder = dimensions(tmp_path, tech="-1001234567890", science="@mdame_alerts")
    assert load_dimension_file(folder / "tech.yaml").alerts.telegram_chat == "-1001234567890"
    assert load_dimension_file(folder / "science.yaml").alerts.telegram_chat == "@mdame_alerts"
    bad = dimensions(tmp_path / "bad", tech="my chat")
    with pytest.raises(DimensionConfigError, match="alerts.telegram_chat"):
        load_dimension_file(bad / "tech.yaml")
    text = (bad / "tech.yaml").read_text().replace("telegram_chat: my chat", "chat: '1'")
    (bad / "tech.yaml").write_text(text)
    with pytest.raises(DimensionConfigError, match="alerts.chat"):
        load_dimension_file(bad / "tech.yaml")
