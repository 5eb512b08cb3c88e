"""`WarmRunLauncher`: the DefaultRunLauncher, with each location's runs forked by its run server.

dagster.yaml:

    run_launcher:
      module: mdame_runtime.run_launcher
      class: WarmRunLauncher

The run servers are `MDAME_RUN_SERVERS`
(`orchestrator=/srv/mdame/run/orchestrator.sock,gpu=/srv/mdame/run/gpu.sock`, their Unix sockets)
in the environment of the processes that launch runs (the daemon) or terminate them (the
webserver), or the `servers` key of its config. With neither it is the DefaultRunLauncher. A
run server answers only its own user: these processes must run as it, on its host.

A location named there has its runs started by its run server (mdame_runtime/run_server.py),
which forks a warm run worker instead of spawning a new interpreter. A location not named, or a
server that cannot be reached or answers with an error (its code changed, it is stopping, it has
as many runs as it may fork), has the run started by its code server as the DefaultRunLauncher
does, with an engine event saying why: a run server that is down costs CPU, never a run.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Self

from dagster._config.config_schema import UserConfigSchema
from dagster._core.launcher import DefaultRunLauncher
from dagster._core.launcher.base import LaunchRunContext
from dagster._core.storage.dagster_run import DagsterRun, DagsterRunStatus
from dagster._serdes.config_class import ConfigurableClassData

from mdame_core import settings
from mdame_runtime.run_server import LOCATION_MODULES, call, socket_path

SERVERS_ENV = "MDAME_RUN_SERVERS"

# The tag naming the run server that forked a run's worker (where to send its termination).
RUN_SERVER_TAG = "mdame/run_server"
REQUEST_TIMEOUT_S = 10.0


def parse_servers(value: str) -> dict[str, str]:
    """`LOCATION=SOCKET_PATH[,...]` -> {location: socket path}; empty means none."""
    servers: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in value.split(","))):
        location, sep, address = item.partition("=")
        if not sep:
            raise ValueError(f"{item!r} is not LOCATION=SOCKET_PATH")
        if location not in LOCATION_MODULES:
            raise ValueError(
                f"run servers: {location!r} is not a code location ({', '.join(LOCATION_MODULES)})"
            )
        servers[location] = socket_path(address)
    return servers


class WarmRunLauncher(DefaultRunLauncher):
    def __init__(
        self,
        inst_data: ConfigurableClassData | None = None,
        servers: str = "",
        request_timeout_s: float = REQUEST_TIMEOUT_S,
    ) -> None:
        self.servers = parse_servers(servers)
        self.request_timeout_s = request_timeout_s
        super().__init__(inst_data=inst_data)

    @classmethod
    def config_type(cls) -> UserConfigSchema:
        from dagster import Field, Noneable, StringSource

        return {
            "servers": Field(
                Noneable(StringSource),
                is_required=False,
                description="LOCATION=SOCKET_PATH,... of the run servers (`mdame run-server`)",
            ),
            "request_timeout_s": Field(float, is_required=False, default_value=REQUEST_TIMEOUT_S),
        }

    @classmethod
    def from_config_value(
        cls, inst_data: ConfigurableClassData, config_value: Mapping[str, Any]
    ) -> Self:
        configured = config_value.get("servers")
        source = "the run launcher's servers" if configured else SERVERS_ENV
        try:
            return cls(
                inst_data=inst_data,
                servers=configured or settings.raw(SERVERS_ENV),
                request_timeout_s=config_value.get("request_timeout_s", REQUEST_TIMEOUT_S),
            )
        except ValueError as exc:
            raise ValueError(f"{source}: {exc}") from None

    def launch_run(self, context: LaunchRunContext) -> None:
        run = context.dagster_run
        origin = run.remote_job_origin
        address = self.servers.get(origin.location_name) if origin is not None else None
        if address is None:
            super().launch_run(context)
            return
        try:
            reply = call(address, {"start": run.run_id}, self.request_timeout_s)
            if "pid" not in reply:
                raise ConnectionError(str(reply.get("error") or reply))
        except (OSError, ValueError) as exc:
            self._instance.report_engine_event(
                f"The run server at {address} did not start the run ({exc}); "
                "its code server starts it instead.",
                run,
                cls=self.__class__,
            )
            super().launch_run(context)
            return
        self._instance.add_run_tags(run.run_id, {RUN_SERVER_TAG: address})
        self._run_ids.add(run.run_id)

    def terminate(self, run_id: str) -> bool:
        run = self._instance.get_run_by_id(run_id) if self.has_instance else None
        if run is None or run.is_finished:
            return super().terminate(run_id)
        # Either worker: its RUN_START would overwrite a CANCELING reported before it.
        run = self._started(run)
        address = run.tags.get(RUN_SERVER_TAG)
        if address is None:
            return super().terminate(run_id)
        self._instance.report_run_canceling(run)
        try:
            reply = call(address, {"terminate": run_id}, self.request_timeout_s)
        except (OSError, ValueError) as exc:
            self._report_unterminated(run, f"the run server at {address} is unreachable ({exc})")
            return False
        if not reply.get("signalled"):
            self._report_unterminated(run, f"the run server at {address} has no such run worker")
            return False
        return True

    def _started(self, run: DagsterRun) -> DagsterRun:
        """The run once its worker has reported RUN_START (or after the request timeout): the
        run storage sets STARTED on RUN_START whatever the status was, so a CANCELING reported
        before it would be lost and the interrupted run failed, not canceled."""
        deadline = time.monotonic() + self.request_timeout_s
        while run.status == DagsterRunStatus.STARTING and time.monotonic() < deadline:
            time.sleep(0.1)
            run = self._instance.get_run_by_id(run.run_id) or run
        return run

    def _report_unterminated(self, run: DagsterRun, why: str) -> None:
        # The liveness sweep fails the run if its worker is gone.
        self._instance.report_engine_event(
            f"Could not send the termination: {why}.", run, cls=self.__class__
        )
