"""The GPU code location as the cluster tests run it: the product's definitions (assets, jobs,
executor, resources from the environment) with visuals that log each generation and can be
slowed down through the run's resource config, so a test can kill a worker mid-generation and
count generations per scene_hash afterwards. Test machinery: workers import it by module name
(`tests.cluster.gpu_location`, the repository root on PYTHONPATH)."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Sequence
from pathlib import Path

import dagster as dg

from mdame_assets import gpu
from mdame_resources.providers.visuals import ProceduralVisuals

GENERATION_LOG = "generations.log"


class LoggedVisuals(ProceduralVisuals):
    """ProceduralVisuals that appends `start|done scene_hash worker` lines to log_dir."""

    log_dir: str = ""
    delay_s: float = 0.0

    def _log(self, event: str, scene_hash: str) -> None:
        if not self.log_dir:
            return
        worker = os.environ.get("MDAME_WORKER_NAME") or f"{socket.gethostname()}:{os.getpid()}"
        line = f"{event} {scene_hash} {worker} {time.time():.3f}\n"
        # One write of a short line with O_APPEND: lines of concurrent workers never interleave.
        fd = os.open(Path(self.log_dir) / GENERATION_LOG, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)

    def generate(
        self,
        scene_hash: str,
        prompt: str,
        palette: Sequence[str],
        duration_s: float,
        out: Path,
        engine: str | None = None,
    ) -> Path:
        self._log("start", scene_hash)
        time.sleep(self.delay_s)
        path = super().generate(scene_hash, prompt, palette, duration_s, out, engine)
        self._log("done", scene_hash)
        return path


def generations(log_dir: Path) -> list[tuple[str, str, str]]:
    """(event, scene_hash, worker) per logged line."""
    path = log_dir / GENERATION_LOG
    if not path.exists():
        return []
    return [
        (parts[0], parts[1], parts[2])
        for parts in (line.split() for line in path.read_text().splitlines())
    ]


@dg.definitions
def defs() -> dg.Definitions:
    location = gpu.defs()  # built as this location loads, from the settings of that moment
    return dg.Definitions(
        assets=location.assets,
        asset_checks=location.asset_checks,
        jobs=location.jobs,
        executor=location.executor,
        resources={**(location.resources or {}), "visuals": LoggedVisuals()},
    )
