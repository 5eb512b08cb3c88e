"""Structured JSON log lines: execution_id, dimension_id, stage, status, plus any fields.

They go to stderr, or appended to the file named by MDAME_LOG_FILE (the demo keeps its
terminal readable that way).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import Any

_logger = logging.getLogger("mdame")
_logger.setLevel(logging.INFO)
_logger.propagate = False


def _ensure_handler() -> None:
    if _logger.handlers:
        return
    path = os.environ.get("MDAME_LOG_FILE")
    if path:
        # A log file in a folder not made yet (a new home) would fail the step that logs.
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    handler = logging.FileHandler(path) if path else logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("%(message)s"))
    _logger.addHandler(handler)


def log_event(execution_id: str, dimension_id: str, stage: str, status: str, **fields: Any) -> str:
    _ensure_handler()
    line = json.dumps(
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
    _logger.info(line)
    return line
