"""`mdame celery-worker`: one Celery worker for the steps of runs on the celery executor,
started the way `dagster-celery worker start` starts one, minus the file of resolved URLs it
writes.

    mdame celery-worker --queue gpu --gpu 0     one per GPU: CUDA_VISIBLE_DEVICES=0,
                                                concurrency 1, prefetch 1
    mdame celery-worker --queue render          encodes and their probes: concurrency 1 (an
                                                encode uses every core), one per render host
    mdame celery-worker --queue dagster         every other step (dagster-celery's default queue)
    mdame celery-worker --print-yaml            the worker YAML (deploy/celery.yaml is a copy),
                                                for `dagster-celery worker start -y`

It replaces itself with

    celery -A dagster_celery.app worker --prefetch-multiplier=1 -Q QUEUE -n NAME@%h [-c N]

with mdame_runtime/celery_worker_config on PYTHONPATH: dagster_celery.app reads its settings
from the dagster_celery_config module there, which takes the broker and backend URLs from the
environment. (`dagster-celery worker start` writes them, passwords included, into a new file
under DAGSTER_HOME at every start.) A supervisor (systemd, supervisord) that starts it signals
the worker itself.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml


def config_dir() -> Path:
    """The folder whose dagster_celery_config module holds the worker's Celery settings."""
    import mdame_runtime

    return Path(mdame_runtime.__file__).resolve().parent / "celery_worker_config"


def worker_command(
    queue: str, name: str, concurrency: int | None, loglevel: str = "INFO"
) -> list[str]:
    exe = shutil.which("celery", path=str(Path(sys.executable).parent)) or shutil.which("celery")
    if not exe:
        raise RuntimeError("celery is not installed (pip install -e .[cluster])")
    # dagster-celery's own worker arguments: one task reserved at a time, the node name's
    # host part filled in by celery.
    command = [exe, "-A", "dagster_celery.app", "worker", "--prefetch-multiplier=1"]
    command += ["--loglevel", loglevel, "-Q", queue, "-n", f"{name}@%h"]
    if concurrency is not None:
        command += [f"--concurrency={concurrency}"]
    return command


def _start(args: argparse.Namespace) -> int:
    from mdame_core import settings
    from mdame_core.dagster_home import apply_dagster_environment
    from mdame_runtime.executors import (
        DEFAULT_QUEUE,
        GPU_QUEUE,
        RENDER_QUEUE,
        celery_worker_yaml,
        require_celery_env,
    )

    if args.print_yaml:
        print(yaml.safe_dump(celery_worker_yaml(), sort_keys=False), end="")
        return 0
    queues = (GPU_QUEUE, RENDER_QUEUE, DEFAULT_QUEUE)
    unknown = [q for q in args.queue.split(",") if q not in queues]
    if unknown:
        # A worker on a queue no step is routed to would wait for work that never comes.
        raise ValueError(f"--queue {args.queue}: {unknown[0]!r} is not one of {', '.join(queues)}")
    settings.mdame_env()
    require_celery_env()
    env = apply_dagster_environment()
    if args.queue == GPU_QUEUE and args.gpu is None:
        raise ValueError("a gpu worker needs --gpu INDEX (one worker per GPU)")
    concurrency = args.concurrency
    if concurrency is None and args.queue in (GPU_QUEUE, RENDER_QUEUE):
        # One generation per GPU at a time; one encode per host (x264 already uses every core).
        concurrency = 1
    label = f"{args.queue}{args.gpu if args.gpu is not None else ''}"
    name = args.name or label
    child: dict[str, Any] = {**settings.environment(), **env}
    child["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(config_dir()), settings.os_variable("PYTHONPATH")) if p
    )
    if args.gpu is not None:
        child["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    # What the scene results record as the generating worker (the host and pid are added).
    child.setdefault("MDAME_WORKER_NAME", name)
    command = worker_command(args.queue, name, concurrency, args.loglevel)
    print("starting: " + " ".join(command), file=sys.stderr, flush=True)
    os.execve(command[0], command, child)
    return 0  # not reached


def add_parser(groups: Any) -> None:
    worker = groups.add_parser(
        "celery-worker", help="a dagster-celery worker for the gpu, render or dagster queue"
    )
    worker.add_argument(
        "--queue",
        "-q",
        default="gpu",
        help="gpu (the GPU steps), render (encodes and probes) or dagster (every other step)",
    )
    worker.add_argument("--gpu", type=int, default=None, help="CUDA_VISIBLE_DEVICES for it")
    worker.add_argument("--name", "-n", default=None, help="node name (default: queue + gpu)")
    worker.add_argument(
        "--concurrency",
        "-c",
        type=int,
        default=None,
        help="pool size (gpu, render: 1; else per CPU)",
    )
    worker.add_argument("--loglevel", "-l", default="INFO")
    worker.add_argument("--print-yaml", action="store_true", help="print the worker YAML only")
    worker.set_defaults(func=_start)
