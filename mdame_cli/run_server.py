"""`mdame run-server --location orchestrator|gpu`: the location's warm run workers.

One per code location, on the host of its code server, the daemon and the webserver, with the
code server's environment; the daemon's `WarmRunLauncher` sends it that location's runs over a
Unix socket (docs/deployment.md: Warm run workers).

    mdame run-server --location orchestrator        listens on $MDAME_HOME/run/orchestrator.sock
    mdame run-server --location gpu --socket /srv/mdame/run/gpu.sock

The socket's folder must be this user's alone (made 0700 when missing; one that others may enter
is refused). Exit status 3 means the code changed on disk under it: a supervisor restarts it on
the new code. Its runs in progress are processes of their own and finish without it.
"""

from __future__ import annotations

import argparse
from typing import Any

from mdame_runtime.run_server import LOCATION_MODULES, RunServer, default_socket, socket_path


def _start(args: argparse.Namespace) -> int:
    from mdame_core import settings
    from mdame_core.dagster_home import apply_dagster_environment
    from mdame_core.logs import configure_process_logging

    path = socket_path(args.socket) if args.socket else default_socket(args.location)
    settings.mdame_env()
    apply_dagster_environment()
    # INFO, redacted, with the HTTP clients quiet: its forked run workers inherit this log.
    configure_process_logging()
    return RunServer(args.location, path).serve_forever()


def add_parser(groups: Any) -> None:
    server = groups.add_parser(
        "run-server", help="a code location's run workers, forked from one warm process"
    )
    server.add_argument("--location", required=True, choices=sorted(LOCATION_MODULES))
    server.add_argument(
        "--socket",
        default=None,
        help="the Unix socket to listen on (default $MDAME_HOME/run/LOCATION.sock)",
    )
    server.set_defaults(func=_start)
