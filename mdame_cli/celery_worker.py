"""`mdame celery-worker`: one dagster-celery worker, started the documented way.

    mdame celery-worker --queue gpu --gpu 0     one per GPU: CUDA_VISIBLE_DEVICES=0,
                                                concurrency 1, prefetch 1
    mdame celery-worker --queue dagster         the CPU steps (dagster-celery's default queue)
    mdame celery-worker --print-yaml            the worker YAML (deploy/celery.yaml is a copy)

It writes the worker YAML (the celery executor's own config, mdame_assets.executors) under
DAGSTER_HOME and replaces itself with

    dagster-celery worker start -A dagster_celery.app -y YAML -q QUEUE -n NAME -- --concurrency=N

so a supervisor (systemd, supervisord) that starts it signals the worker itself.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import yaml


def worker_command(
    config_yaml: Path, queue: str, name: str, concurrency: int | None, loglevel: str = "INFO"
) -> list[str]:
    exe = shutil.which("dagster-celery", path=str(Path(sys.executable).parent)) or shutil.which(
        "dagster-celery"
    )
    if not exe:
        raise RuntimeError("dagster-celery is not installed (pip install -e .[cluster])")
    command = [exe, "worker", "start", "-A", "dagster_celery.app", "-y", str(config_yaml)]
    command += ["-q", queue, "-n", name, "-l", loglevel]
    # After `--`: arguments for `celery worker` itself (dagster-celery already passes
    # --prefetch-multiplier=1).
    if concurrency is not None:
        command += ["--", f"--concurrency={concurrency}"]
    return command


def _start(args: argparse.Namespace) -> int:
    from mdame_assets.executors import GPU_QUEUE, celery_worker_yaml, require_celery_env
    from mdame_core import settings
    from mdame_core.dagster_home import apply_dagster_environment

    text = yaml.safe_dump(celery_worker_yaml(), sort_keys=False)
    if args.print_yaml:
        print(text, end="")
        return 0
    settings.mdame_env()
    require_celery_env()
    env = apply_dagster_environment()
    if args.queue == GPU_QUEUE and args.gpu is None:
        raise ValueError("a gpu worker needs --gpu INDEX (one worker per GPU)")
    concurrency = args.concurrency
    if concurrency is None and args.queue == GPU_QUEUE:
        concurrency = 1  # one generation per GPU at a time
    label = f"{args.queue}{args.gpu if args.gpu is not None else ''}"
    name = args.name or label
    config_yaml = Path(env["DAGSTER_HOME"]) / "celery" / f"worker-{label}.yaml"
    config_yaml.parent.mkdir(parents=True, exist_ok=True)
    config_yaml.write_text(text)  # environment variable names only, no values
    child: dict[str, Any] = dict(os.environ)
    # dagster-celery runs `celery` from PATH: this environment's, also when the venv is not
    # activated (a supervisor running .venv/bin/mdame).
    child["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), child.get("PATH", "")])
    if args.gpu is not None:
        child["CUDA_VISIBLE_DEVICES"] = str(args.gpu)
    # What the scene results record as the generating worker (the host and pid are added).
    child.setdefault("MDAME_WORKER_NAME", name)
    command = worker_command(config_yaml, args.queue, name, concurrency, args.loglevel)
    print("starting: " + " ".join(command), file=sys.stderr, flush=True)
    os.execve(command[0], command, child)
    return 0  # not reached


def add_parser(groups: Any) -> None:
    worker = groups.add_parser(
        "celery-worker", help="a dagster-celery worker for the gpu queue (one per GPU) or dagster"
    )
    worker.add_argument(
        "--queue", "-q", default="gpu", help="gpu (the GPU steps) or dagster (every other step)"
    )
    worker.add_argument("--gpu", type=int, default=None, help="CUDA_VISIBLE_DEVICES for it")
    worker.add_argument("--name", "-n", default=None, help="node name (default: queue + gpu)")
    worker.add_argument(
        "--concurrency", "-c", type=int, default=None, help="pool size (gpu: 1; else per CPU)"
    )
    worker.add_argument("--loglevel", "-l", default="INFO")
    worker.add_argument("--print-yaml", action="store_true", help="print the worker YAML only")
    worker.set_defaults(func=_start)
