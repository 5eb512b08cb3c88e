"""The plain parts of `mdame doctor`: the table and exit status, redaction, the Edge-TTS voices
list URL, the migration comparison and the disk verdict."""

from __future__ import annotations

import pytest

from mdame_domain.doctor import (
    GIB,
    Check,
    Redactor,
    Status,
    disk_verdict,
    display_url,
    edge_voice_list_url,
    exit_code,
    migration_problems,
    render_table,
)


def test_table_and_exit_code() -> None:
    checks = [
        Check("env", Status.OK, "ENV=dev"),
        Check("youtube:tech/@tech", Status.FAIL, "token refresh refused " * 10),
        Check("gpu", Status.SKIP, "none"),
    ]
    table = render_table(checks, width=80)
    lines = table.splitlines()
    assert lines[0].split() == ["check", "status", "detail"]
    assert lines[2].startswith("env ") and " OK " in lines[2]
    assert all(len(line) <= 80 for line in lines)
    assert lines[-1] == "1 OK, 0 WARN, 1 FAIL, 1 SKIP"
    assert exit_code(checks) == 1
    assert exit_code([Check("a", Status.WARN, ""), Check("b", Status.SKIP, "")]) == 0
    assert checks[1].group == "youtube"


def test_redactor_masks_secrets_bot_paths_and_url_passwords() -> None:
    redact = Redactor(["sk-test-not-secret-123", "", "1"])  # too short to mask by value
    redact.add("rt-abc-not-secret")
    text = (
        "key sk-test-not-secret-123 at https://api.telegram.org/bot1234:AAAA-bbbb/getMe; "
        "redis://:pa55w0rd@host:6379/0 postgresql://app:hunter22@db/x token rt-abc-not-secret 1"
    )
    out = redact(text)
    for secret in ("sk-test-not-secret-123", "1234:AAAA-bbbb", "pa55w0rd", "hunter22", "rt-abc"):
        assert secret not in out
    assert "/bot***/getMe" in out and "redis://:***@host" in out and "app:***@db" in out
    assert out.endswith(" 1")


def test_display_url_drops_password_and_query() -> None:
    assert display_url("redis://:pw@h:6379/0") == "redis://h:6379/0"
    assert display_url("https://u:pw@h/p?key=k") == "https://u@h/p"


def test_edge_voice_list_url() -> None:
    assert edge_voice_list_url(
        "wss://speech.platform.bing.com/consumer/speech/synthesize/readaloud/edge/v1"
        "?TrustedClientToken=6A5A"
    ) == (
        "https://speech.platform.bing.com/consumer/speech/synthesize/readaloud/voices/list"
        "?trustedclienttoken=6A5A"
    )
    assert edge_voice_list_url("ws://127.0.0.1:9/p/edge/v1?TrustedClientToken=x").startswith(
        "http://127.0.0.1:9/p/voices/list?"
    )
    with pytest.raises(ValueError, match="ws:// or wss://"):
        edge_voice_list_url("https://example.com/edge/v1?x=1")


def test_migration_problems() -> None:
    files = [("0001_a.sql", "a" * 64), ("0002_b.sql", "b" * 64), ("0003_c.sql", "c" * 64)]
    assert migration_problems(files, {n: s for n, s in files}) == []
    problems = migration_problems(files[:2], {"0001_a.sql": "0" * 64, "0009_z.sql": "z" * 64})
    assert problems == [
        "edited after it was applied: 0001_a.sql",
        "applied but not in this checkout (code older than the database?): 0009_z.sql",
        "1 pending: 0002_b.sql (run `mdame db migrate`)",
    ]


def test_migration_problems_of_function_files_and_a_squashed_history() -> None:
    files = [("0028_baseline.sql", "b" * 64), ("functions/jobs.sql", "j" * 64)]
    # A changed function file is run again by the next migrate: pending, never "edited".
    assert migration_problems(
        files, {"0028_baseline.sql": "b" * 64, "functions/jobs.sql": "0" * 64}
    ) == ["1 pending: functions/jobs.sql (run `mdame db migrate`)"]
    # A database the squashed per-change files migrated: the next migrate adopts the baseline.
    squashed = {"0001_schema.sql": "1" * 64, "0002_rpcs.sql": "2" * 64}
    assert migration_problems(files, dict(squashed), squashed) == [
        "2 pending: 0028_baseline.sql, functions/jobs.sql (run `mdame db migrate`)"
    ]
    edited = {"0001_schema.sql": "1" * 64, "0002_rpcs.sql": "0" * 64}
    assert migration_problems(files, edited, squashed)[0] == (
        "edited after it was applied: 0002_rpcs.sql"
    )


def test_disk_verdict() -> None:
    assert disk_verdict(5 * GIB, 10 * GIB) is Status.FAIL
    assert disk_verdict(15 * GIB, 10 * GIB) is Status.WARN
    assert disk_verdict(25 * GIB, 10 * GIB) is Status.OK
