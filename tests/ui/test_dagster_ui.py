"""The Dagster UI in a real browser (Debian's chromium through Playwright), with both code
locations loaded, the daemon running, on scratch storage and the offline providers.

One walk through the UI, in order, as an operator would: no community modal; the global asset
graph holds both locations' assets; a partitions view is date x dimension; a backfill of ONE
dimension over TWO days launched from the UI (the content group's "Materialize all", the
one-click path the README documents) reaches publications through both hop sensors; the checks
view shows results with their metadata. Screenshots go to test-artifacts/ui/.

Every wait is on a state (Playwright's auto-waiting `expect`, or the database for the pipeline's
end), none is a sleep; the timeouts are generous because the machine may be busy.
"""

from __future__ import annotations

import re
import time

import psycopg
import pytest
from playwright.sync_api import Page, expect
from uikit import ARTIFACTS, DagsterUI

from mdame_runtime.run_launcher import RUN_SERVER_TAG

pytestmark = pytest.mark.slow

DIMENSION = "science"
DAYS = ("2026-11-27", "2026-11-28")
LOAD_S = 180  # both code locations loading on a busy machine
PIPELINE_S = 900  # the backfill through both hops and publishing; generous for a busy machine


def shot(page: Page, name: str) -> None:
    page.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def published(ui: DagsterUI) -> int:
    return ui.rows(
        """SELECT count(*) FROM mdame.publications p
             JOIN mdame.scripts s ON s.id = p.script_id
             JOIN mdame.dimensions d ON d.id = s.dimension_id
            WHERE p.state = 'published' AND d.slug = %s""",
        (DIMENSION,),
    )[0][0]


def test_dagster_ui_backfills_one_dimension_from_the_browser(
    dagster_ui: DagsterUI, browser_page: Page
) -> None:
    ui, page = dagster_ui, browser_page
    page.set_default_timeout(LOAD_S * 1000)
    expect.set_options(timeout=LOAD_S * 1000)
    timings: dict[str, float] = {}
    started = time.monotonic()

    # The global graph: both locations' assets (trends: orchestrator; scene_clips: gpu).
    page.goto(f"{ui.url}/asset-groups")
    for group in ("content", "visuals", "publishing"):
        expect(page.get_by_text(group, exact=True).first).to_be_visible()
    # No "Join the Dagster community" modal: dagster.yaml has `nux: enabled: false`, and this
    # DAGSTER_HOME is brand new, so the modal would be up by now without it.
    expect(page.get_by_text("Join the Dagster community")).to_have_count(0)
    expect(page.get_by_role("dialog")).to_have_count(0)
    page.get_by_role("button", name="settings", exact=True).last.click()
    page.get_by_role("menuitem", name=re.compile("Expand all groups")).click()
    page.keyboard.press("Escape")
    for asset in ("trends", "scene_plan", "scene_clips", "publications"):
        expect(page.get_by_text(asset, exact=True).first).to_be_visible()
    shot(page, "1-asset-graph")
    timings["graph"] = time.monotonic() - started

    # The partitions view: date x dimension.
    page.goto(f"{ui.url}/assets/trends?view=partitions")
    expect(page.get_by_placeholder(re.compile("Filter by date"))).to_be_visible()
    expect(page.get_by_placeholder(re.compile("Filter by dimension"))).to_be_visible()
    expect(page.get_by_text(DIMENSION, exact=True).first).to_be_visible()
    expect(page.get_by_text("2026-11-28", exact=True).first).to_be_visible()
    shot(page, "2-partitions")

    # The one-click path: the content group's "Materialize all", one dimension, two days.
    page.goto(f"{ui.url}/locations/orchestrator/asset-groups/content")
    page.get_by_role("button", name=re.compile("Materialize all")).click()
    dialog = page.get_by_role("dialog")
    expect(dialog.get_by_text("Launch runs to materialize 4 assets")).to_be_visible()
    dates = dialog.get_by_placeholder(re.compile("ex: 2026-11-01"))
    dates.fill(f"[{DAYS[0]}...{DAYS[1]}]")
    dates.press("Enter")
    dialog.get_by_text("Select a partition or create one").click()
    page.get_by_role("menuitem", name=re.compile(DIMENSION)).click()
    page.keyboard.press("Escape")  # closes the menu, not the dialog
    expect(dialog.get_by_text("2 partitions", exact=True)).to_be_visible()
    shot(page, "3-backfill-dialog")
    dialog.get_by_role("button", name="Launch backfill").click()
    expect(page.get_by_text(re.compile("Created backfill"))).to_be_visible()
    timings["launched"] = time.monotonic() - started

    # Through the GPU hop (scene_clips) and the publishing hop to publications, both days.
    deadline = time.monotonic() + PIPELINE_S
    while published(ui) < len(DAYS):
        assert ui.proc.poll() is None, f"dagster dev exited:\n{ui.tail()}"
        assert time.monotonic() < deadline, f"not published in {PIPELINE_S}s:\n{ui.tail()}"
        page.wait_for_timeout(1000)  # the browser stays responsive while the database is polled
    timings["published"] = time.monotonic() - started

    page.goto(f"{ui.url}/runs")
    # The backfill's own runs are Dagster's implicit asset job; the hops launch these two.
    for job in ("scene_clips_job", "publishing_job"):
        expect(page.get_by_text(job).first).to_be_visible()
    # Every run the daemon launched was forked by its location's run server (`mdame ui` starts
    # them), none spawned by a code server.
    with psycopg.connect(ui.dagster_url) as conn:
        launched = conn.execute(
            """SELECT r.pipeline_name, t.value FROM runs r
                 LEFT JOIN run_tags t ON t.run_id = r.run_id AND t.key = %s""",
            (RUN_SERVER_TAG,),
        ).fetchall()
    assert launched and all(server for _, server in launched), launched
    page.goto(f"{ui.url}/assets/publications?view=partitions")
    expect(page.get_by_text(re.compile(r"Materialized \(2\)"))).to_be_visible()
    shot(page, "4-published")

    # The checks view: results with their metadata (hook_score records every hook's score).
    page.goto(f"{ui.url}/assets/scripts?view=checks")
    expect(page.get_by_text("hook_score").first).to_be_visible()
    page.get_by_text("hook_score").first.click()
    expect(page.get_by_text("hook_scores").first).to_be_visible()
    expect(page.get_by_text(re.compile("Passed|Succeeded")).first).to_be_visible()
    shot(page, "5-asset-checks")
    timings["total"] = time.monotonic() - started
    print("ui timings (s):", {k: round(v, 1) for k, v in timings.items()})
