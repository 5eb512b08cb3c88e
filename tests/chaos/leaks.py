"""Where a leaked credential would show: every log file, Dagster's event log and compute logs,
the alerts (the alerts table, the outbox's alert files, what the Bot API received).

The local servers hand out credentials carrying one mark (fakes.common.SECRET_MARK_VAR), and
the demo's keys and client secrets carry it too (fakes.demo.demo_secret), so one substring finds
any of them wherever it was written."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import psycopg

from fakes.telegram import TelegramServer

_CONTEXT = 60


def _around(text: str, at: int) -> str:
    return text[max(0, at - _CONTEXT) : at + _CONTEXT].replace("\n", "\\n")


def in_files(mark: str, roots: Sequence[Path], skip: Sequence[Path] = ()) -> list[str]:
    """Each file under `roots` (not under `skip`) that holds `mark`, with where."""
    needle = mark.encode()
    found = []
    skipped = [p.resolve() for p in skip]
    for root in roots:
        for path in sorted(p for p in root.rglob("*") if p.is_file() and not p.is_symlink()):
            if any(path.resolve().is_relative_to(s) for s in skipped):
                continue
            data = path.read_bytes()
            at = data.find(needle)
            if at >= 0:
                text = data.decode("utf-8", "replace")
                found.append(f"{path}: ...{_around(text, text.find(mark))}...")
    return found


def _rows(url: str, query: str, mark: str) -> list[str]:
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(query, {"mark": mark}).fetchall()
    return [str(row[0]) for row in rows]


def in_dagster(mark: str, dagster_url: str) -> list[str]:
    """Dagster's event log (step logs, failures, materializations) and the runs' bodies."""
    found = []
    for table, column in (("event_logs", "event"), ("runs", "run_body")):
        for text in _rows(
            dagster_url,
            f"SELECT {column} FROM {table} WHERE strpos({column}, %(mark)s) > 0",  # noqa: S608
            mark,
        ):
            found.append(f"dagster {table}: ...{_around(text, text.find(mark))}...")
    return found


def in_alerts(mark: str, owner_url: str, bot: TelegramServer | None = None) -> list[str]:
    """The alerts table's texts and delivery errors, and every message the Bot API received."""
    found = [
        f"mdame.alerts: ...{_around(text, text.find(mark))}..."
        for text in _rows(
            owner_url,
            "SELECT concat_ws(' | ', text, last_error) FROM mdame.alerts "
            "WHERE strpos(concat_ws(' | ', text, last_error), %(mark)s) > 0",
            mark,
        )
    ]
    for request in bot.requests if bot is not None else ():
        fields: Iterable[str] = request.fields.values()
        for value in fields:
            if mark in value:
                found.append(f"telegram {request.method}: ...{_around(value, value.find(mark))}...")
    return found
