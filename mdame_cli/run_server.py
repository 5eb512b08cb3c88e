"""`mdame run-server --location orchestrator|gpu`: the location's warm run workers.

One per code location, on its code server's host, with the code server's environment; the
daemon's `WarmRunLauncher` sends it that location's runs (docs/deployment.md: Warm run workers).

    mdame run-server --location orchestrator                 listens on 127.0.0.1:4310
    mdame run-server --location gpu --bind 127.0.0.1:4311

Exit status 3 means the code changed on disk under it: a supervisor restarts it on the new code.
Its runs in progress are processes of their own and finish without it.
"""

from __future__ import annotations

import argparse
from typing import Any

from mdame_assets.run_server import DEFAULT_PORTS, LOCATION_MODULES, RunServer, parse_address


def _start(args: argparse.Namespace) -> int:
    from mdame_core import settings
    from mdame_core.dagster_home import apply_dagster_environment
    from mdame_core.logs import configure_process_logging

    bind = args.bind or f"127.0.0.1:{DEFAULT_PORTS[args.location]}"
    host, port = parse_address(bind)
    settings.mdame_env()
    apply_dagster_environment()
    # INFO, redacted, with the HTTP clients quiet: its forked run workers inherit this log.
    configure_process_logging()
    return RunServer(args.location, host, port).serve_forever()


def add_parser(groups: Any) -> None:
    server = groups.add_parser(
        "run-server", help="a code location's run workers, forked from one warm process"
    )
    server.add_argument("--location", required=True, choices=sorted(LOCATION_MODULES))
    server.add_argument(
        "--bind", default=None, help="HOST:PORT (default 127.0.0.1:4310 orchestrator, :4311 gpu)"
    )
    server.set_defaults(func=_start)
