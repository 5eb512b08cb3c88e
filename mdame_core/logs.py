"""Structured JSON log lines: execution_id, dimension_id, stage, status, plus any fields.

They go to stderr, or appended to the file named by MDAME_LOG_FILE (the demo keeps its
terminal readable that way).

Every process of ours also keeps credentials out of the Python log (`quiet_http_clients`, run
when mdame_core is imported): the HTTP client libraries log each request's URL (httpx at INFO),
and a URL may carry a token (an Instagram refresh's access_token, a TikTok upload_url's
upload_token, a Google API key), so they log warnings only, and what they do log is redacted.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

from mdame_core import settings
from mdame_domain.redaction import redact

_logger = logging.getLogger("mdame")
_logger.setLevel(logging.INFO)
_logger.propagate = False

# The client libraries that log request URLs: httpx (INFO), httpcore and urllib3 (DEBUG),
# google-api-python-client (its request dumps).
HTTP_CLIENT_LOGGERS = ("httpx", "httpcore", "urllib3", "googleapiclient")


class RedactingFilter(logging.Filter):
    """Masks credentials in a record's message (mdame_domain.redaction.redact). On a logger it
    sees that logger's own records; on a handler, every record the handler writes."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        cleaned = redact(message)
        if cleaned != message:
            record.msg, record.args = cleaned, ()
        return True


def _with_filter(target: logging.Logger | logging.Handler) -> None:
    if not any(isinstance(f, RedactingFilter) for f in target.filters):
        target.addFilter(RedactingFilter())


def quiet_http_clients() -> None:
    """The HTTP client libraries log warnings and errors only, redacted, whatever level the
    root logger is at (a run worker forked by `mdame run-server` logs INFO). Idempotent."""
    for name in HTTP_CLIENT_LOGGERS:
        logger = logging.getLogger(name)
        logger.setLevel(logging.WARNING)
        _with_filter(logger)


def configure_process_logging(level: int = logging.INFO) -> None:
    """A long-running process's Python log (`mdame run-server` and the run workers it forks):
    the root logger at `level` to stderr, every line it writes redacted, the HTTP clients
    quiet."""
    logging.basicConfig(level=level, format="%(asctime)s %(name)s %(message)s")
    for handler in logging.getLogger().handlers:
        _with_filter(handler)
    quiet_http_clients()


def _ensure_handler() -> None:
    if _logger.handlers:
        return
    path = settings.raw("MDAME_LOG_FILE")
    if path:
        # A log file in a folder not made yet (a new home) would fail the step that logs.
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    handler = logging.FileHandler(path) if path else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    _logger.addHandler(handler)


def log_event(execution_id: str, dimension_id: str, stage: str, status: str, **fields: Any) -> str:
    _ensure_handler()
    # Redacted: a field may quote an error whose text holds a URL with a token.
    line = redact(
        json.dumps(
            {
                "ts": datetime.now(UTC).isoformat(timespec="milliseconds"),
                "execution_id": execution_id,
                "dimension_id": dimension_id,
                "stage": stage,
                "status": status,
                **fields,
            },
            default=str,
        )
    )
    _logger.info(line)
    return line
