"""The `mdame` command line, at the top of the layering: it dispatches to the core and the assets.

    mdame db migrate                 apply pending migrations as the owner role
    mdame db url [--role app|owner]  print the connection URL in use (for psql)
    mdame db status                  applied migrations, recorded ENV, rows per table
    mdame env                        shell exports for Dagster commands: eval "$(mdame env)"
    mdame backfill --dimension D --from DAY [--to DAY] [--select SELECTION]
                                     a range of days for one dimension, partition by partition
    mdame demo                       today's partition of every active dimension, published
    mdame ui                         the Dagster UI (webserver + daemon) on 127.0.0.1
    mdame report [--dimension D]     today's analytics and this week's Strategic Auditor report
    mdame celery-worker --queue gpu --gpu N | --queue dagster
                                     a dagster-celery worker (docs/deployment.md)
    mdame run-server --location orchestrator|gpu [--socket PATH]
                                     a location's run workers, forked from one warm process
    mdame accounts connect DIMENSION [--account HANDLE] [--console]
                                     authorise a YouTube channel; its grant is stored encrypted
    mdame accounts list              accounts, stored grants, needs_reauth and pauses
    mdame keys rotate                re-wrap every data key under a new master key
    mdame models pull [--engine E | --model ID | --all]
                                     download diffusers weights into MDAME_MODEL_DIR (online)
    mdame models check               models present, their size, which dimensions need them
    mdame params show DIMENSION      the Adaptive Engine's current parameter set and history
    mdame params rollback DIMENSION  restore the previous set (exit 3: nothing to roll back)
    mdame calls retry --dimension D [--day DAY]
                                     re-arm paid calls a provider refused, once fixed
    mdame status [--dimension D] [--day DAY]
                                     per partition: stage, last runs, why not published,
                                     what waits until when, open alerts and their fix
    mdame doctor [--only GROUPS]     check a deployment before the first real run (a table;
                                     exit 1 on any FAIL): mdame_cli/doctor/
    mdame config [--set] [--long] [--json]
                                     every setting's effective value and its source, secrets
                                     masked (mdame_core/settings/model.py declares them)

The crash harness is test machinery under tests/, run by the Makefile (README: Crash safety).

Errors print one line to stderr and exit 1 (set MDAME_DEBUG=1 for the traceback).
ENV defaults to dev when unset, as in the Makefile (never to prod).
Every setting is validated before a command starts: a bad value exits 1 with one line per bad
variable (its value, unless a secret, and what it takes); `mdame config` still prints its table.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from datetime import date
from pathlib import Path

import psycopg
from psycopg import sql

from mdame_cli.accounts import add_parsers as add_account_parsers
from mdame_cli.calls import add_parsers as add_calls_parsers
from mdame_cli.celery_worker import add_parser as add_celery_worker_parser
from mdame_cli.config import add_parser as add_config_parser
from mdame_cli.config import show as show_config
from mdame_cli.doctor import add_parser as add_doctor_parser
from mdame_cli.models import add_parsers as add_model_parsers
from mdame_cli.params import add_parsers as add_params_parsers
from mdame_cli.run_server import add_parser as add_run_server_parser
from mdame_cli.status import add_parser as add_status_parser
from mdame_core import settings
from mdame_core.dagster_home import apply_dagster_environment, dagster_environment
from mdame_core.migrate import migrate


def _db_migrate(args: argparse.Namespace) -> None:
    applied = migrate(
        settings.database_url("owner"),
        settings.mdame_env(),
        notify=lambda message: print(f"mdame: {message}", file=sys.stderr),
    )
    if applied:
        for name in applied:
            print(f"applied {name}")
    else:
        print("up to date")


def _db_url(args: argparse.Namespace) -> None:
    print(settings.database_url(args.role))


def _db_status(args: argparse.Namespace) -> None:
    with psycopg.connect(settings.database_url("owner"), autocommit=True) as conn:
        if not _exists(conn, "mdame.schema_migrations"):
            print("not migrated: run `mdame db migrate`")
            return
        print("migrations:")
        for name, applied_at in conn.execute(
            "SELECT filename, applied_at FROM mdame.schema_migrations ORDER BY filename"
        ):
            print(f"  {name}  {applied_at:%Y-%m-%d %H:%M:%S%z}")
        env = None
        if _exists(conn, "mdame.environment"):
            row = conn.execute("SELECT env FROM mdame.environment").fetchone()
            env = row[0] if row else None
        current = settings.raw("ENV") or "unset"
        note = "" if env == current else f"  (this shell has ENV={current}: clients will refuse)"
        print(f"env: {env or 'not recorded'}{note}")
        print("rows:")
        tables = conn.execute(
            """SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
                WHERE n.nspname = 'mdame' AND c.relkind IN ('r', 'p') ORDER BY c.relname"""
        ).fetchall()
        for (table,) in tables:
            query = sql.SQL("SELECT count(*) FROM mdame.{}").format(sql.Identifier(table))
            count = conn.execute(query).fetchone()[0]  # type: ignore[index]
            print(f"  {table:<22} {count}")


def _env(args: argparse.Namespace) -> None:
    exports = {"ENV": settings.mdame_env(), **dagster_environment()}
    for name, value in exports.items():
        print(f"export {name}={shlex.quote(value)}")


def _backfill(args: argparse.Namespace) -> int:
    settings.mdame_env()
    settings.use_scratch_tmpdir()
    apply_dagster_environment()
    _default_log_file()
    from mdame_cli.backfill import backfill  # Dagster loads only for these commands

    return backfill(args.dimension, args.first, args.last or args.first, args.select)


def run_demo(
    videos_at: str = "",
    day: date | None = None,
    only: Sequence[str] = (),
    dimensions: Path | None = None,
) -> int:
    """The demo with Dagster's home and the JSON pipeline log set up (also used by
    `python -m fakes.demo`): `day`'s partitions (today by default) of the niches in
    `dimensions` (settings.dimensions_dir() by default), or of those named in `only`."""
    if settings.mdame_env() == "prod":
        _refuse_prod_without_live_sources()
    settings.use_scratch_tmpdir()
    apply_dagster_environment()
    log_file = _default_log_file()
    from mdame_cli.demo import main as demo_main  # Dagster loads only for these commands

    code = demo_main(day, only=only, videos_at=videos_at, dimensions=dimensions)
    print(f"JSON pipeline log: {log_file}")
    return code


def _default_log_file() -> Path:
    """MDAME_LOG_FILE for this process and the runs it starts: $MDAME_HOME/logs/pipeline.jsonl
    unless it is set; its folder made."""
    default = settings.mdame_home() / "logs" / "pipeline.jsonl"
    path = Path(settings.set_default("MDAME_LOG_FILE", str(default)))
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _refuse_prod_without_live_sources() -> None:
    """A prod demo publishes for real: say up front what it lacks, not a feed error later."""
    from mdame_domain.dimensions import load_registry
    from mdame_domain.prod_readiness import prod_problems, prod_problems_message
    from mdame_resources.providers.selection import provider_set

    registry = load_registry(settings.REPO_ROOT / "dimensions")
    problems = prod_problems(registry.dimensions, provider_set(), settings.environment())
    if problems:
        raise settings.SettingsError(prod_problems_message(problems))


def _demo(args: argparse.Namespace) -> int:
    return run_demo()


def _dimensions_sync(args: argparse.Namespace) -> int:
    """Registers dimensions/*.yaml as the admin role; the running sensor then adds the new
    partitions. Exit 1 when a file is malformed (its dimension keeps its last good state)."""
    settings.mdame_env()
    from mdame_core.state import StateStore
    from mdame_pipeline.dimension_registry import sync_registry

    with StateStore(role="admin") as admin:
        report = sync_registry(admin)
    for error in report.errors:
        print(f"error: {error}", file=sys.stderr)
    print(f"active: {', '.join(report.active) or '(none)'}")
    if report.inactive:
        print(f"inactive: {', '.join(report.inactive)}")
    return 1 if report.errors else 0


def _report(args: argparse.Namespace) -> int:
    settings.mdame_env()
    apply_dagster_environment()
    from mdame_cli.reporting import main as report_main  # Dagster loads only here

    return report_main(only=args.dimension or ())


def _ui(args: argparse.Namespace) -> int:
    settings.mdame_env()
    settings.use_scratch_tmpdir()
    apply_dagster_environment()
    from mdame_cli.ui import run_ui  # dagster dev in its own process group

    return run_ui(settings.REPO_ROOT / "workspace.yaml", args.port)


def _exists(conn: psycopg.Connection, relation: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (relation,)).fetchone()
    return bool(row and row[0])


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mdame", description="MD-AME operator commands")
    groups = parser.add_subparsers(dest="group", required=True)
    db = groups.add_parser("db", help="the PostgreSQL state store")
    commands = db.add_subparsers(dest="command", required=True)
    commands.add_parser("migrate", help="apply pending migrations").set_defaults(func=_db_migrate)
    url = commands.add_parser("url", help="print the connection URL in use")
    url.add_argument("--role", choices=["app", "admin", "owner"], default="app")
    url.set_defaults(func=_db_url)
    commands.add_parser("status", help="migrations, ENV and row counts").set_defaults(
        func=_db_status
    )
    groups.add_parser("env", help="shell exports for Dagster commands").set_defaults(func=_env)
    dims = groups.add_parser("dimensions", help="the dimension registry")
    dim_commands = dims.add_subparsers(dest="command", required=True)
    dim_commands.add_parser(
        "sync", help="register dimensions/*.yaml (budgets, accounts, activity) as the admin role"
    ).set_defaults(func=_dimensions_sync)
    fill = groups.add_parser(
        "backfill",
        help="a range of days for one dimension, one partition after the other, in this process",
    )
    fill.add_argument("--dimension", required=True, help="the dimension's slug, e.g. tech")
    fill.add_argument("--from", dest="first", type=date.fromisoformat, required=True)
    fill.add_argument("--to", dest="last", type=date.fromisoformat, help="default: --from")
    fill.add_argument(
        "--select",
        default="",
        help="a Dagster asset selection, e.g. 'trends+' or 'group:content' (default: the whole "
        "graph, as the schedule and hop sensors run it); checks of selected assets run too",
    )
    fill.set_defaults(func=_backfill)
    groups.add_parser("demo", help="publish today's videos on the offline providers").set_defaults(
        func=_demo
    )
    report = groups.add_parser("report", help="today's analytics and this week's report")
    report.add_argument("--dimension", action="append", help="only this dimension (repeatable)")
    report.set_defaults(func=_report)
    ui = groups.add_parser("ui", help="the Dagster UI with both code locations")
    ui.add_argument("--port", type=int, default=3000)
    ui.set_defaults(func=_ui)
    add_celery_worker_parser(groups)
    add_run_server_parser(groups)
    add_account_parsers(groups)
    add_model_parsers(groups)
    add_params_parsers(groups)
    add_calls_parsers(groups)
    add_doctor_parser(groups)
    add_status_parser(groups)
    add_config_parser(groups)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    args.env_defaulted = settings.default_env()
    if args.env_defaulted and args.group == "env":
        print("mdame: ENV is not set: using dev (the Makefile's default)", file=sys.stderr)
    try:
        if args.func is not show_config:  # config prints the table, the bad rows marked
            settings.validate()  # a bad value stops every command before it does anything
        code = args.func(args)
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # an operator command: one clear line, no traceback
        if _debug():
            raise
        for message in _error_lines(exc):
            print(f"mdame: error: {message}", file=sys.stderr)
        if args.group == "env":
            # Read by `eval "$(mdame env)"`: a failing statement, so eval fails too (and a
            # `set -e` script or `&&` chain stops) instead of going on with nothing exported.
            print("false")
        return 1
    return code or 0


def _debug() -> bool:
    """MDAME_DEBUG, read where an error is handled: a bad MDAME_DEBUG is no traceback."""
    try:
        return bool(settings.get("MDAME_DEBUG"))
    except settings.SettingsError:
        return False


def _error_lines(exc: Exception) -> list[str]:
    """One line per bad variable of a failed validation; else the error's first line."""
    text = str(exc).strip()
    if not text:
        return [type(exc).__name__]
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if isinstance(exc, settings.SettingsError) and lines[0] == "bad settings:":
        return lines[1:]
    return lines[:1]


if __name__ == "__main__":
    sys.exit(main())
