"""The control plane with many dimensions: the daily schedule and the sensors' ticks.

Creates a scratch state database (migrated) and a scratch Dagster database on the local
cluster, writes --dims dimension files (copies of dimensions/tech.yaml) into a scratch
MDAME_DIMENSIONS_DIR and registers them with `sync_registry`, the operator's command. Each
partition gets one finished run of its hop's job in the instance, and then new work through the
RPCs, as the stages leave it: today a script whose scenes are planned (the GPU hop's work) and
yesterday a script whose clips are ready (the publishing hop's), so each hop sensor requests a
run for every dimension, the most work a tick has. Then
it evaluates, --ticks times each, what the daemon evaluates: the daily schedule, the registry
sensor, both hop sensors and the content retry sensor, with the real resources against those
databases, and prints p50, p95 and the largest tick, the run requests of the last tick and the
p95 against the 5 s target as a ratio. Nothing is launched. Drops the databases at the end.

With --runs it runs real partitions instead: today's partition of each of --dims dimensions
end to end, as `make demo` runs them (content, scene clips, publishing; offline providers, the
`tiny` media profile unless MDAME_MEDIA_PROFILE says otherwise), and prints the wall and CPU
time per partition, runs per minute, and the PostgreSQL transactions and Dagster event-log
rows per partition.

    make bench-scale                                  # 1,000 dimensions, the control plane
    make bench-scale BENCH_ARGS="--runs --dims 10"    # 10 partitions end to end
    PYTHONPATH=. ENV=dev python -m bench.scale [--dims 1000] [--ticks 15] [--runs]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import psycopg

from bench.scratch import scratch_databases
from mdame_core import settings
from mdame_core.state import StateStore

TARGET_P95_S = 5.0  # the target for every sensor and the schedule at 1,000 dimensions


@dataclass(frozen=True)
class Ticks:
    name: str
    seconds: list[float]
    requests: int

    def row(self) -> str:
        p50 = p95 = statistics.median(self.seconds)
        if len(self.seconds) > 1:
            p95 = statistics.quantiles(self.seconds, n=20, method="inclusive")[18]
        return (
            f"{self.name:<28} {p50:8.3f} {p95:8.3f} {max(self.seconds):8.3f} {self.requests:9d}"
            f" {p95 / TARGET_P95_S:8.2f}x"
        )


def write_dimensions(folder: Path, count: int) -> list[str]:
    template = (settings.REPO_ROOT / "dimensions" / "tech.yaml").read_text()
    slugs = [f"niche{i:05d}" for i in range(count)]
    for number, slug in enumerate(slugs):
        text = template.replace("slug: tech", f"slug: {slug}", 1)
        text = text.replace("handle: tech-in-60", f"handle: {slug}-channel", 1)
        (folder / f"{slug}.yaml").write_text(text.replace("Tech in 60", f"Niche {number}", 1))
    return slugs


def seed_work(app: StateStore, slugs: list[str], today: date) -> None:
    """Per dimension: today's script planned, yesterday's with its clips ready, through the
    same RPCs the stages call, under each dimension's lock."""
    from mdame_pipeline.lifecycle import script_states
    from mdame_pipeline.locks import held_lock

    dimensions = {d.slug: d.id for d in app.list_dimensions()}
    for slug in slugs:
        with held_lock(app, slug, "bench-scale") as held:
            for day, last in ((today, "planned"), (today - timedelta(days=1), "visuals_ready")):
                base = {"dimension_id": dimensions[slug], "partition_date": day.isoformat()}
                topic = held.upsert_work_unit(
                    "topic", f"topic:{slug}:{day}", {**base, "title": slug}
                )
                script = held.upsert_work_unit(
                    "script", f"script:{slug}:{day}", {**base, "topic_id": topic}
                )
                path = script_states(held, "drafted", last)
                for src, dst in zip(path, path[1:], strict=False):
                    held.transition("script", script, src, dst)


def seed_runs(instance, jobs: dict[str, list[str]]) -> int:  # noqa: ANN001
    """One finished run of each hop job per partition it has work in, as yesterday's would be."""
    import dagster as dg
    from dagster._core.test_utils import create_run_for_test

    from mdame_assets.jobs import partition_tags

    count = 0
    for job_name, keys in jobs.items():
        for key in keys:
            tags = {**partition_tags(key), "dagster/partition": key}
            create_run_for_test(
                instance, job_name=job_name, tags=tags, status=dg.DagsterRunStatus.SUCCESS
            )
            count += 1
    return count


def timed(name: str, ticks: int, evaluate: Callable[[], int]) -> Ticks:
    seconds, requests = [], 0
    for _ in range(ticks):
        started = time.perf_counter()
        requests = evaluate()
        seconds.append(time.perf_counter() - started)
    return Ticks(name, seconds, requests)


def run(dims: int, ticks: int, runs: bool, launched: int = 0) -> None:
    with scratch_databases() as (owner, app_url, dagster_url), tempfile.TemporaryDirectory() as t:
        niches = Path(t) / "dimensions"
        niches.mkdir()
        os.environ.update(
            MDAME_HOME=str(Path(t) / "home"),  # media, outbox and logs of this bench only
            MDAME_LOG_FILE=str(Path(t) / "pipeline.jsonl"),
            DAGSTER_HOME=str(Path(t) / "dagster_home"),
            MDAME_DAGSTER_DATABASE_URL=dagster_url,  # the project's dagster.yaml reads it
            MDAME_DIMENSIONS_DIR=str(niches),
            MDAME_DATABASE_URL=owner,
            MDAME_APP_DATABASE_URL=app_url,
        )
        os.environ.setdefault("MDAME_MEDIA_PROFILE", "tiny")
        from mdame_core.dagster_home import apply_dagster_environment

        apply_dagster_environment()
        if runs:
            run_partitions(dims, niches, owner, dagster_url, launched)
        else:
            measure(dims, ticks, niches, owner, app_url)


def run_partitions(
    dims: int, niches: Path, owner: str, dagster_url: str, launched: int = 0
) -> None:
    """Today's partition of `dims` dimensions through the demo's own loop, then of
    `launched` more as the daemon launches them, measured."""
    import resource

    from mdame_cli.demo import main as demo_main

    slugs = write_dimensions(niches, dims + launched)
    before = _transactions(owner)
    sessions_before = _sessions(dagster_url)
    cpu_before = _cpu_seconds(resource)
    started = time.perf_counter()
    code = demo_main(only=slugs[:dims])
    wall = time.perf_counter() - started
    own_after, media_after = _cpu_seconds(resource)
    own, media = own_after - cpu_before[0], media_after - cpu_before[1]
    cpu = own + media
    time.sleep(1.0)  # the server reports a closed backend's counters within a second
    transactions = _transactions(owner) - before
    sessions = _sessions(dagster_url) - sessions_before
    with psycopg.connect(dagster_url) as conn:
        (events,) = conn.execute("SELECT count(*) FROM event_logs").fetchone() or (0,)
        (dagster_runs,) = conn.execute("SELECT count(*) FROM runs").fetchone() or (0,)
    print(
        f"\n{dims} partitions end to end (demo exit {code}, media profile "
        f"{os.environ['MDAME_MEDIA_PROFILE']}): {wall:.1f} s wall, {cpu:.1f} s CPU (this process "
        f"and its children)"
    )
    print(f"  per partition: {wall / dims:.2f} s wall, {cpu / dims:.2f} s CPU")
    print(
        f"  CPU per partition in this process (Dagster and MD-AME's Python, the encode not "
        f"included): {own / dims:.2f} s; in the media tools (ffmpeg, espeak): {media / dims:.2f} s"
    )
    print(f"  Dagster runs: {dagster_runs}, {dagster_runs / wall * 60:.1f} per minute")
    print(f"  PostgreSQL transactions per partition (state database): {transactions / dims:.0f}")
    print(f"  Dagster event-log rows per partition: {events / dims:.0f}")
    print(f"  connections opened to Dagster's storage per partition: {sessions / dims:.0f}")
    if launched:
        run_workers(slugs[dims:], cpu / dims, media / dims)


def run_workers(slugs: list[str], loop_cpu: float, loop_media: float) -> None:
    """Each partition's three runs launched as the daemon launches them (a code server per
    location, `instance.launch_run` through dagster.yaml's WarmRunLauncher), one after another,
    alternating between the two ways a run worker starts: spawned by its location's code server
    (no run servers: the DefaultRunLauncher) and forked by its location's run server.

    A partition's CPU is that of the code servers and run servers with what they reaped (their
    run workers, and the workers' media tools), counted once every worker is gone. A forked
    worker also logs its own CPU and its media tools' (run_server.WORKER_CPU_LINE): its own is
    the run's orchestration."""
    import re
    import shutil
    import subprocess

    import dagster as dg

    from mdame_assets import gpu
    from mdame_assets.jobs import partition_tags
    from mdame_cli.runs import JOBS
    from mdame_runtime.run_server import WORKER_CPU_LINE, call
    from tests.launchkit import launch, wait_finished, workspace

    stages = [("gpu" if defs is gpu.defs else "orchestrator", name) for defs, name in JOBS]
    today = datetime.now(UTC).date().isoformat()
    # Sockets of its own (mkdtemp's folder is 0700), beside any `mdame ui`'s.
    sockets = tempfile.mkdtemp(prefix="mdame-bench-run-")
    addresses = {location: f"{sockets}/{location}.sock" for location in ("orchestrator", "gpu")}
    logs = Path(os.environ["MDAME_HOME"]) / "run-servers.log"
    logs.parent.mkdir(parents=True, exist_ok=True)
    mdame = str(Path(sys.executable).parent / "mdame")
    with open(logs, "ab") as out:
        servers = [
            subprocess.Popen(
                [mdame, "run-server", "--location", location, "--socket", address],
                cwd=settings.REPO_ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
            )  # fmt: skip
            for location, address in addresses.items()
        ]
    spawned, forked = "spawned by the code server", "forked by the run server"
    spent: dict[str, list[float]] = {spawned: [], forked: []}
    worker_cpu: list[tuple[float, float]] = []  # per forked partition: its workers', media
    pattern = re.compile(re.escape(WORKER_CPU_LINE).replace("%s", "(\\S+)").replace(
        "%\\.3f", "([0-9.]+)"))  # fmt: skip
    try:
        for address in addresses.values():
            _wait_answering(address, call)
        with dg.DagsterInstance.get() as instance, workspace(instance) as request:
            launcher = instance.run_launcher
            for index, slug in enumerate(slugs):
                mode = spawned if index % 2 == 0 else forked
                launcher.servers = dict(addresses) if mode == forked else {}  # type: ignore[attr-defined]
                key = f"{today}|{slug}"
                tags = {**partition_tags(key), "dagster/partition": key}
                before = _children_cpu()
                started = time.perf_counter()
                run_ids = []
                for location, job_name in stages:
                    run_ids.append(launch(instance, request, location, job_name, tags))
                    run = wait_finished(instance, run_ids[-1])
                    if run.status != dg.DagsterRunStatus.SUCCESS:
                        print(f"  {job_name} of {key} ({mode}) ended {run.status.value}")
                        return
                _wait_reaped(instance, run_ids)
                spent[mode].append(_children_cpu() - before)
                line = f"  {key}: {mode}, {time.perf_counter() - started:.1f} s wall, "
                line += f"{spent[mode][-1]:.2f} s CPU"
                if mode == forked:
                    found = {m[1]: m for m in pattern.finditer(logs.read_text())}
                    own = sum(float(found[r][2]) for r in run_ids if r in found)
                    tools = sum(float(found[r][3]) for r in run_ids if r in found)
                    worker_cpu.append((own, tools))
                    line += f" (its workers {own:.2f} s, their media tools {tools:.2f} s)"
                print(line)
    finally:
        for server in servers:
            server.terminate()
            server.wait(30)
        shutil.rmtree(sockets, ignore_errors=True)
    print(f"\n{len(slugs)} partitions launched as the daemon launches them (3 runs each), CPU per "
          f"partition, media included (median; in the demo's loop {loop_cpu:.2f} s, of which "
          f"the media tools {loop_media:.2f} s):")  # fmt: skip
    medians = {mode: statistics.median(values) for mode, values in spent.items() if values}
    for mode, value in medians.items():
        print(f"  {mode:<28} {value:6.2f} s  ({len(spent[mode])} partitions)")
    if len(medians) == 2 and worker_cpu:
        own = statistics.median(o for o, _ in worker_cpu)
        media = statistics.median(t for _, t in worker_cpu)
        print(f"  forked / spawned: {medians[forked] / medians[spawned]:.2f}x; forked / the "
              f"loop: {medians[forked] / loop_cpu:.2f}x")  # fmt: skip
        print(f"  orchestration per partition (the forked workers' own CPU): {own:.2f} s, "
              f"{own / 2.0:.2f}x the 2 s target; spawned, less the same media "
              f"({media:.2f} s): {medians[spawned] - media:.2f} s")  # fmt: skip


def _wait_reaped(instance, run_ids: list[str]) -> None:  # noqa: ANN001
    """Until every run's worker (the pid it reported) is gone from /proc, so its parent has
    counted its CPU."""
    from mdame_runtime.liveness import worker_pid

    deadline = time.monotonic() + 60
    for run_id in run_ids:
        reported = worker_pid(instance, run_id)
        while reported and Path(f"/proc/{reported[0]}").exists() and time.monotonic() < deadline:
            time.sleep(0.1)


def _wait_answering(address: str, call: Callable, idle: bool = False) -> None:  # type: ignore[type-arg]
    """Until the run server answers (and, with `idle`, has reaped every run worker)."""
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if not idle or not call(address, {"ping": True}, 2.0)["runs"]:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError(f"the run server at {address} did not answer")


def _children_cpu() -> float:
    """CPU seconds of this process's child processes and of everything they reaped."""
    from mdame_runtime.liveness import stat_fields

    total = 0
    for task in Path("/proc/self/task").iterdir():
        for pid in (task / "children").read_text().split():
            fields = stat_fields(pid)
            if fields:
                total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / os.sysconf("SC_CLK_TCK")


def _transactions(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT xact_commit + xact_rollback FROM pg_stat_database"
            " WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def _sessions(url: str) -> int:
    """Connections the server has opened to the database so far (PostgreSQL 14+)."""
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT sessions FROM pg_stat_database WHERE datname = current_database()"
        ).fetchone()
    return int(row[0]) if row else 0


def _cpu_seconds(resource) -> tuple[float, float]:  # noqa: ANN001
    """CPU seconds of this process (Dagster and MD-AME's Python) and of its finished children
    (ffmpeg, ffprobe, espeak: the media work)."""
    own, children = (
        resource.getrusage(resource.RUSAGE_SELF),
        resource.getrusage(resource.RUSAGE_CHILDREN),
    )
    return own.ru_utime + own.ru_stime, children.ru_utime + children.ru_stime


def measure(dims: int, ticks: int, niches: Path, owner: str, app_url: str) -> None:
    import dagster as dg

    from mdame_assets.defs.content_retry import make_content_retry_sensor
    from mdame_assets.defs.dimensions.sensors import dimension_registry_sensor
    from mdame_assets.defs.publications.sensors import make_publishing_sensor
    from mdame_assets.defs.schedules import daily_content_schedule
    from mdame_assets.gpu_defs.clips.sensors import make_scene_jobs_sensor
    from mdame_assets.jobs import PUBLISHING_JOB, SCENE_CLIPS_JOB
    from mdame_pipeline.dimension_registry import sync_registry
    from mdame_resources.state import StateStoreResource
    from mdame_runtime.partition_keys import DIMENSION_PARTITION, partition_key

    slugs = write_dimensions(niches, dims)
    today = datetime.now(UTC).date()
    with StateStore(owner, env="dev", role="admin") as admin:
        started = time.perf_counter()
        sync_registry(admin)
        synced = time.perf_counter() - started
        started = time.perf_counter()
        sync_registry(admin)  # the same files again: what every later sync costs
        resynced = time.perf_counter() - started
    app = StateStore(app_url, env="dev", pool_max=2)
    resources = {"state": StateStoreResource(database_url=app_url, pool_max=2)}
    with dg.DagsterInstance.get() as instance:
        first = dg.build_sensor_context(instance=instance, resources=resources)
        started = time.perf_counter()
        result = dimension_registry_sensor(first)
        first_registry = time.perf_counter() - started
        for request in result.dynamic_partitions_requests:
            instance.add_dynamic_partitions(DIMENSION_PARTITION, list(request.partition_keys))
        yesterday = today - timedelta(days=1)
        runs = seed_runs(
            instance,
            {
                SCENE_CLIPS_JOB: [str(partition_key(today, s)) for s in slugs],
                PUBLISHING_JOB: [str(partition_key(yesterday, s)) for s in slugs],
            },
        )
        started = time.perf_counter()
        seed_work(app, slugs, today)  # after the runs: new work for every hop partition
        seeded = time.perf_counter() - started

        def sensor(definition: dg.SensorDefinition) -> Callable[[], int]:
            def evaluate() -> int:
                context = dg.build_sensor_context(instance=instance, resources=resources)
                out = definition(context)
                return len(out.run_requests or []) if isinstance(out, dg.SensorResult) else 0

            return evaluate

        def schedule() -> int:
            at = datetime.combine(today, datetime.min.time(), UTC) + timedelta(hours=10)
            # Closed each tick: the context opens an instance of its own from the ref, as the
            # daemon's does.
            with dg.build_schedule_context(
                instance=instance, scheduled_execution_time=at, resources=resources
            ) as context:
                out = daily_content_schedule(context)
            return len(out) if isinstance(out, list) else 0

        rows = [
            timed("daily_content_schedule", ticks, schedule),
            timed("dimension_registry_sensor", ticks, sensor(dimension_registry_sensor)),
            timed("scene_jobs_sensor (GPU hop)", ticks, sensor(make_scene_jobs_sensor())),
            timed("publishing_sensor (hop)", ticks, sensor(make_publishing_sensor())),
            timed("content_retry_sensor", ticks, sensor(make_content_retry_sensor())),
        ]
    app.close()
    print(
        f"{dims} dimensions registered by `mdame dimensions sync` in {synced:.1f} s (again, "
        f"unchanged: {resynced:.2f} s); work seeded "
        f"through the RPCs in {seeded:.1f} s; {runs} finished runs in the instance; the registry "
        f"sensor's first tick (adds {dims} partitions) took {first_registry:.2f} s"
    )
    columns = f"{'p50 s':>8} {'p95 s':>8} {'max s':>8} {'requests':>9} {'p95/5s':>9}"
    print(f"{'evaluation':<28} {columns}")
    for row in rows:
        print(row.row())
    print(f"({ticks} ticks each; target: p95 at most {TARGET_P95_S:.0f} s, a ratio of 1.00x)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dims", type=int, default=1000, help="dimensions (default 1000)")
    parser.add_argument("--ticks", type=int, default=15, help="evaluations of each (default 15)")
    parser.add_argument("--runs", action="store_true", help="run the partitions end to end")
    parser.add_argument(
        "--launched",
        type=int,
        default=0,
        help="with --runs: this many more partitions launched as the daemon launches them, "
        "alternately spawned by the code servers and forked by run servers (default 0)",
    )
    args = parser.parse_args(argv)
    if args.dims < 1 or args.ticks < 1:
        parser.error("--dims and --ticks must be at least 1")
    run(args.dims, args.ticks, args.runs, args.launched)
    return 0


if __name__ == "__main__":
    sys.exit(main())
