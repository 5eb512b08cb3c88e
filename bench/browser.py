"""Debian's chromium for Playwright, and a free local port: what the UI bench and the UI tests
both start the Dagster UI and a browser with (`playwright install` cannot download a browser
here, so chromium is launched by path)."""

from __future__ import annotations

import shutil
from pathlib import Path

CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"]


def chromium_path() -> str | None:
    return shutil.which("chromium") or (
        "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
    )
