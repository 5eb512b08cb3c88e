"""`dagster_ui`: the Dagster UI with both code locations on scratch storage (tests/ui/uikit.py),
and `browser_page`: a Playwright page in Debian's chromium, its viewport sized for screenshots."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from uikit import ARTIFACTS, DagsterUI, dagster_dev  # noqa: E402

from bench.browser import CHROMIUM_ARGS, chromium_path  # noqa: E402
from tests.scratch_db import create_database, drop_database  # noqa: E402


@pytest.fixture(scope="module")
def dagster_ui(template_db: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterUI]:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    mdame_db = create_database(template_db, "_ui")
    dagster_db = create_database(None, "_ui_dagster")
    home = tmp_path_factory.mktemp("ui-home")
    log = ARTIFACTS / "dagster-dev.log"
    log.unlink(missing_ok=True)
    try:
        with dagster_dev(mdame_db.owner, mdame_db.app, dagster_db.owner, home, log) as ui:
            yield ui
    finally:
        drop_database(dagster_db.name)
        drop_database(mdame_db.name)


@pytest.fixture(scope="module")
def browser_page() -> Iterator:
    from playwright.sync_api import sync_playwright

    executable = chromium_path()
    if executable is None:
        pytest.fail("chromium is not installed (scripts/install.sh installs it with apt)")
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            yield page
        finally:
            browser.close()
