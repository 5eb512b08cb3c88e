"""The Dagster UI's partitions view of `renders` over --dims dimensions x --days days, in chromium.

Creates a scratch state database (migrated) and a scratch Dagster database on the local
cluster. The first partition day, MDAME_FIRST_DAY, is today - (days - 1), so the date dimension
has --days keys. The bench registers --dims dimensions as dynamic partitions in the Dagster
instance (as the registry sensor does; the partitions view reads nothing of the state
database), and gives the view status to show: a materialization of `renders` for each of the last
--materialized-days days of every dimension, written in batches through the event log storage,
and --failed partitions whose run failed before materializing them. Then it starts
`dagster-webserver` with the orchestrator location only (no daemon) on that instance, opens
/assets/renders?view=partitions in Debian's chromium through Playwright, and times the page
from navigation start until the view shows every partition counted and its status: "N
Partitions Selected", the legend's Failed, Materialized and Missing counts, and today's row of
the date list. The first load is cold (the first after the webserver started, on a fresh
instance: Dagster builds the asset's status cache then), the next loads are warm. It prints
the seeding time, each load's time and its ratio to the 5 s target, and the GraphQL requests
each load made before the view was shown, longest first, to say where the time goes. The
screenshot and the webserver's log land in test-artifacts/bench/. The webserver's process
group is stopped and the databases dropped at the end, on failure too.

    make bench-ui                                    # 1,000 dimensions x 365 days
    make bench-ui BENCH_ARGS="--dims 50 --days 30"
    PYTHONPATH=. ENV=dev python -m bench.ui_partitions [--dims 1000] [--days 365]
        [--materialized-days 30] [--failed 10] [--loads 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import httpx

from bench.browser import CHROMIUM_ARGS, chromium_path
from bench.scratch import scratch_databases
from mdame_cli.ui import free_port
from mdame_core import settings

TARGET_S = 5.0  # the target for this view at 1,000 dimensions x 365 days
ASSET = "renders"
BATCH = 500  # materializations per event-log write
REPO = settings.REPO_ROOT
ARTIFACTS = Path(os.environ.get("MDAME_TEST_ARTIFACTS") or REPO / "test-artifacts") / "bench"
LOAD_TIMEOUT_S = 300.0  # one page load on a busy two-core machine, generously


@dataclass
class Request:
    operation: str
    start_s: float  # since navigation start
    seconds: float
    response_bytes: int


@dataclass
class Load:
    name: str
    seconds: float
    requests: list[Request] = field(default_factory=list)

    def before_shown(self) -> list[Request]:
        return [r for r in self.requests if r.start_s <= self.seconds]


def dimension_keys(count: int) -> list[str]:
    return [f"niche{i:05d}" for i in range(count)]


def seed(instance, dims: list[str], days: list[date], failed: int) -> tuple[int, int]:  # noqa: ANN001
    """Materializations of `renders` for every dimension on each of `days`: the entries
    `instance.report_runless_asset_event` writes, stored BATCH at a time, and `failed`
    partitions of the day before `days` planned by a run that then failed. Returns the counts.

    report_runless_asset_event stores one entry per transaction: about 30 ms each on the
    two-core machine, 15 minutes for 30,000; the event log's batch write takes well under 1 ms
    an entry and leaves the same rows (and the asset's record points at the last one)."""
    import dagster as dg
    from dagster._core.events import (
        AssetMaterializationPlannedData,
        DagsterEvent,
        DagsterEventType,
        StepMaterializationData,
    )
    from dagster._core.events.log import EventLogEntry
    from dagster._core.instance.utils import RUNLESS_JOB_NAME, RUNLESS_RUN_ID
    from dagster._core.test_utils import create_run_for_test

    from mdame_runtime.partition_keys import partition_key

    key = dg.AssetKey(ASSET)
    batch: list[EventLogEntry] = []
    written = 0
    for dimension in dims:
        for day in days:
            event = DagsterEvent(
                event_type_value=DagsterEventType.ASSET_MATERIALIZATION.value,
                event_specific_data=StepMaterializationData(
                    dg.AssetMaterialization(
                        asset_key=key, partition=str(partition_key(day, dimension))
                    )
                ),
                job_name=RUNLESS_JOB_NAME,
            )
            batch.append(
                EventLogEntry(
                    user_message="",
                    level=20,
                    job_name=RUNLESS_JOB_NAME,
                    run_id=RUNLESS_RUN_ID,
                    error_info=None,
                    timestamp=time.time(),
                    dagster_event=event,
                )
            )
            if len(batch) == BATCH:
                instance.event_log_storage.store_event_batch(batch)
                written, batch = written + len(batch), []
    if batch:
        instance.event_log_storage.store_event_batch(batch)
        written += len(batch)
    if not days:
        return written, 0
    day_before = days[0] - timedelta(days=1)
    for dimension in dims[:failed]:
        partition = str(partition_key(day_before, dimension))
        run = create_run_for_test(
            instance,
            job_name="publishing_job",
            tags={"dagster/partition": partition},
            status=dg.DagsterRunStatus.FAILURE,
        )
        instance.report_dagster_event(
            DagsterEvent.build_asset_materialization_planned_event(
                "publishing_job",
                "renders",
                AssetMaterializationPlannedData(key, partition=partition),
            ),
            run_id=run.run_id,
        )
    return written, min(failed, len(dims))


def webserver_environ(owner: str, app: str, dagster_url: str, home: Path) -> dict[str, str]:
    """This process's environment less the deployment's own settings, and the scratch ones."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MDAME_", "DAGSTER_"))}
    env.update(
        ENV="dev",
        MDAME_PROVIDERS="offline",
        MDAME_FIRST_DAY=os.environ["MDAME_FIRST_DAY"],
        MDAME_DATABASE_URL=owner,
        MDAME_APP_DATABASE_URL=app,
        MDAME_DAGSTER_DATABASE_URL=dagster_url,
        MDAME_HOME=str(home),
        DAGSTER_HOME=str(home / "dagster"),
        MDAME_LOG_FILE=str(home / "logs" / "pipeline.jsonl"),
        PYTHONUNBUFFERED="1",
    )
    return env


@dataclass
class Webserver:
    url: str
    log: Path
    proc: subprocess.Popen

    def tail(self, lines: int = 40) -> str:
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])


LOCATION_QUERY = """{ workspaceOrError { __typename ... on Workspace { locationEntries {
  name loadStatus locationOrLoadError { __typename ... on PythonError { message } } } } } }"""


@contextmanager
def webserver(env: dict[str, str], home: Path, timeout: float = 300) -> Iterator[Webserver]:
    """`dagster-webserver` with the orchestrator location only, serving and with the location
    loaded; its process group is stopped at the end."""
    from mdame_cli.ui import stop_group

    workspace = home / "workspace.yaml"
    workspace.write_text(
        "load_from:\n  - python_module:\n      module_name: mdame_assets.orchestrator\n"
        "      location_name: orchestrator\n"
    )
    port = free_port()
    log = home / "logs" / "webserver.log"
    out = open(log, "ab")  # noqa: SIM115 - the child owns it
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "dagster-webserver"), "-w", str(workspace)]
        + ["-h", "127.0.0.1", "-p", str(port)],
        cwd=home / "dagster",  # DAGSTER_HOME: no "dagster.yaml will not be used" warning
        env=env,
        stdout=out,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group, stopped as a whole below
    )
    out.close()
    server = Webserver(f"http://127.0.0.1:{port}", log, proc)
    try:
        deadline = time.monotonic() + timeout
        while not _location_loaded(server):
            if proc.poll() is not None:
                raise RuntimeError(
                    f"dagster-webserver exited ({proc.returncode}):\n{server.tail()}"
                )
            if time.monotonic() > deadline:
                raise RuntimeError(f"the location did not load in {timeout:.0f}s:\n{server.tail()}")
            time.sleep(0.5)
        yield server
    finally:
        stop_group(proc.pid, grace_s=15)
        proc.wait()


def _location_loaded(server: Webserver) -> bool:
    try:
        answer = httpx.post(f"{server.url}/graphql", json={"query": LOCATION_QUERY}, timeout=10)
    except httpx.TransportError:
        return False
    if answer.status_code != 200:
        return False
    entries = answer.json()["data"]["workspaceOrError"].get("locationEntries") or []
    for entry in entries:
        if entry["loadStatus"] != "LOADED":
            return False
        loaded = entry["locationOrLoadError"] or {}
        if loaded.get("__typename") == "PythonError":
            raise RuntimeError(f"location {entry['name']} failed to load: {loaded['message']}")
    return bool(entries)


def _operation(request) -> str:  # noqa: ANN001
    try:
        body = request.post_data_json or {}
    except (ValueError, TypeError):
        body = {}
    if isinstance(body, dict) and body.get("operationName"):
        return str(body["operationName"])
    return request.url.split("?op=")[-1] if "?op=" in request.url else "?"


def measure_load(page, url: str, name: str, shown) -> Load:  # noqa: ANN001
    """One navigation to `url`, timed until `shown(page)` returns; the GraphQL requests the page
    made meanwhile, with their own timings."""
    requests: list[Request] = []
    navigation_ms = time.time() * 1000

    def finished(request) -> None:  # noqa: ANN001
        if "/graphql" not in request.url:
            return
        timing = request.timing
        try:
            size = request.sizes()["responseBodySize"]
        except Exception:  # noqa: BLE001 - a size is a nicety; the page may be gone already
            size = 0
        requests.append(
            Request(
                _operation(request),
                (timing["startTime"] - navigation_ms) / 1000,
                max(timing["responseEnd"], 0) / 1000,
                size,
            )
        )

    page.on("requestfinished", finished)
    try:
        started = time.perf_counter()
        page.goto(url, wait_until="commit")
        shown(page)
        seconds = time.perf_counter() - started
        page.wait_for_timeout(1500)  # requests the page has in flight finish and are recorded
    finally:
        page.remove_listener("requestfinished", finished)
    return Load(name, seconds, sorted(requests, key=lambda r: -r.seconds))


def expected_texts(total: int, materialized: int, failed: int) -> list[str]:
    """What the view prints once the asset's status is loaded: the partitions selected (all of
    them) and the count of each status, as its legend writes them ("Missing (1240)")."""
    missing = total - materialized - failed
    return [
        f"{total:,} Partitions Selected",
        f"Failed ({failed})",
        f"Materialized ({materialized})",
        f"Missing ({missing})",
    ]


def view_shown(texts: list[str], today: date):  # noqa: ANN201
    """Every text of `texts` and the date list's first row (today) visible."""
    import re

    from playwright.sync_api import expect

    def shown(page) -> None:  # noqa: ANN001
        for text in texts:
            # The legend may group digits as the status bar does (1,240): either spelling.
            number = re.search(r"\((\d+)\)", text)
            if number:
                grouped = text.replace(number.group(1), f"{int(number.group(1)):,}")
                pattern = f"^({re.escape(text)}|{re.escape(grouped)})$"
                locator = page.get_by_text(re.compile(pattern))
            else:
                locator = page.get_by_text(text, exact=True)
            expect(locator.first).to_be_visible(timeout=LOAD_TIMEOUT_S * 1000)
        expect(page.get_by_text(today.isoformat(), exact=True).first).to_be_visible(
            timeout=LOAD_TIMEOUT_S * 1000
        )

    return shown


def run(dims: int, days: int, materialized_days: int, failed: int, loads: int) -> None:
    executable = chromium_path()
    if executable is None:
        raise SystemExit("chromium is not installed (scripts/install.sh installs it with apt)")
    today = datetime.now(UTC).date()
    first_day = today - timedelta(days=days - 1)
    # Before mdame_assets is imported here, and for the webserver's code server.
    os.environ["MDAME_FIRST_DAY"] = first_day.isoformat()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with (
        scratch_databases("ui") as (owner, app, dagster_url),
        tempfile.TemporaryDirectory(prefix="mdame-bench-ui-") as t,
    ):
        home = Path(t)
        (home / "dagster").mkdir()
        (home / "logs").mkdir()
        (home / "dagster" / "dagster.yaml").symlink_to(REPO / "dagster.yaml")
        env = webserver_environ(owner, app, dagster_url, home)
        import dagster as dg

        from mdame_runtime.partition_keys import DIMENSION_PARTITION

        keys = dimension_keys(dims)
        status_days = [today - timedelta(days=n) for n in range(min(materialized_days, days))]
        status_days.reverse()
        # The failures are on the day before the materialized ones, when it is a partition.
        if not status_days or status_days[0] == first_day:
            failed = 0
        os.environ["MDAME_DAGSTER_DATABASE_URL"] = dagster_url  # the project's dagster.yaml
        with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
            started = time.perf_counter()
            instance.add_dynamic_partitions(DIMENSION_PARTITION, keys)
            registered = time.perf_counter() - started
            started = time.perf_counter()
            written, failures = seed(instance, keys, status_days, failed)
            seeded = time.perf_counter() - started
        print(
            f"{dims} dimensions x {days} days ({first_day} to {today}): {dims} dynamic "
            f"partitions added in {registered:.2f} s; {written:,} materializations of {ASSET} "
            f"(the last {len(status_days)} days) written in {seeded:.1f} s "
            f"({seeded / max(written, 1) * 1000:.2f} ms each, {failures} failed runs included)"
        )
        texts = expected_texts(dims * days, written, failures)
        started = time.perf_counter()
        with webserver(env, home) as server:
            print(
                "dagster-webserver serving, orchestrator location loaded in "
                f"{time.perf_counter() - started:.1f} s"
            )
            try:
                results = browse(server, executable, view_shown(texts, today), loads)
            finally:
                shutil.copy(server.log, ARTIFACTS / "ui-partitions-webserver.log")
    report(results, texts)


def browse(server: Webserver, executable: str, shown, loads: int) -> list[Load]:  # noqa: ANN001
    from playwright.sync_api import sync_playwright

    url = f"{server.url}/assets/{ASSET}?view=partitions"
    results: list[Load] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            for n in range(loads):
                name = "cold" if n == 0 else f"warm {n}"
                try:
                    results.append(measure_load(page, url, name, shown))
                except Exception:
                    page.screenshot(path=str(ARTIFACTS / "ui-partitions-failed.png"))
                    (ARTIFACTS / "ui-partitions-failed.txt").write_text(page.inner_text("body"))
                    raise
            page.screenshot(path=str(ARTIFACTS / "ui-partitions.png"))
        finally:
            browser.close()
    return results


def report(results: list[Load], texts: list[str]) -> None:
    waited = ", ".join(f"'{text}'" for text in texts)
    print(f"waited for: {waited} and today's row, on /assets/{ASSET}?view=partitions")
    print(f"{'load':<8} {'seconds':>8} {'of 5 s':>7}")
    for load in results:
        print(f"{load.name:<8} {load.seconds:8.2f} {load.seconds / TARGET_S:6.2f}x")
    for load in results:
        print(f"\nGraphQL requests of the {load.name} load started before the view was shown:")
        print(f"  {'operation':<44} {'start s':>8} {'took s':>8} {'bytes':>10}")
        for r in load.before_shown():
            print(f"  {r.operation:<44} {r.start_s:8.2f} {r.seconds:8.2f} {r.response_bytes:10,d}")
    print(f"\nscreenshot: {ARTIFACTS / 'ui-partitions.png'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=1000, help="dimensions (default 1000)")
    parser.add_argument("--days", type=int, default=365, help="partition days (default 365)")
    parser.add_argument(
        "--materialized-days",
        type=int,
        default=30,
        help="days materialized for every dimension, up to today (default 30)",
    )
    parser.add_argument("--failed", type=int, default=10, help="failed partitions (default 10)")
    parser.add_argument("--loads", type=int, default=3, help="page loads, cold first (default 3)")
    args = parser.parse_args(argv)
    if min(args.dims, args.days, args.loads) < 1 or min(args.materialized_days, args.failed) < 0:
        parser.error("--dims, --days and --loads must be at least 1, the others 0 or more")
    run(args.dims, args.days, args.materialized_days, args.failed, args.loads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
