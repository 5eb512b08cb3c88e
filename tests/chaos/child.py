"""One run of one partition, as a cron tick would start it: the crash harness's child process.

It runs the partition's three jobs in this process (mdame_assets.runs.run_partition) against
the database, home and media root the environment names (MDAME_DATABASE_URL,
MDAME_APP_DATABASE_URL, MDAME_HOME, MDAME_MEDIA_ROOT), with an ephemeral Dagster instance:
Dagster's run storage is not state, PostgreSQL is. MDAME_CRASH_AT / MDAME_RPC_TRACE install the
crash hook (crashpoint.py), a commit observer that SIGKILLs this process at a commit boundary.

The harness forks these from a warm fork server (multiprocessing's forkserver, preloaded with
this module), so a case does not pay for importing Dagster and the definitions twice.
`python -m tests.chaos.child <partition_key>` runs one by hand.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

import dagster as dg

import mdame_domain.probe
import mdame_domain.visuals
from mdame_assets.partitions import DIMENSION_PARTITION, PartitionRef
from mdame_assets.runs import run_partition
from mdame_domain.media_store import LocalMediaStore, sha256_file
from mdame_resources.media import media_root
from mdame_resources.providers.visuals import ProceduralVisuals
from mdame_resources.state import close_clients
from tests.chaos.crashpoint import install_from_env

# Set by the harness: memoize deterministic media work across cases (see install_memos).
MEMO_ENV = "MDAME_CHAOS_MEMO"


def run_child(key: str) -> int:
    """Runs the partition once; prints the outcome as JSON; 0 when every job succeeded."""
    install_from_env()
    if os.environ.get(MEMO_ENV) == "1":
        install_memos()
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions(DIMENSION_PARTITION, [PartitionRef.parse(key).dimension])
    outcome = run_partition(instance, key)
    close_clients()
    print(json.dumps(asdict(outcome)), flush=True)
    return 0 if outcome.ok else 1


def forked_main(key: str, env: Mapping[str, str | None], log_path: str) -> None:
    """Entry point in a process forked by the harness: its environment, its log, one run."""
    for name, value in env.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    code = 2
    try:
        code = run_child(key)
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # no atexit work inherited from the fork server


# ------------------------------------------------------------------------------------------
# Memos: the harness runs the same partition hundreds of times. Two pieces of media work are
# pure functions of their inputs and dominate a run on CPUs: generating procedural clips and
# analysing a render (check_render). They are remembered across cases in the shared media
# root, keyed on their inputs and on their module's source, like the render step's own
# derived-output memo. No RPC is involved, so the sequence of commits is unchanged.
# ------------------------------------------------------------------------------------------
def _source_digest(module: Any) -> str:
    return hashlib.sha256(Path(module.__file__).read_bytes()).hexdigest()


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode()).hexdigest()


def install_memos() -> None:
    if getattr(ProceduralVisuals, "_chaos_memo", False):
        return
    _memoize_clips()
    _memoize_check_render()


def _memoize_clips() -> None:
    original = ProceduralVisuals.generate
    source = _source_digest(mdame_domain.visuals)

    def generate(
        self: ProceduralVisuals,
        scene_hash: str,
        prompt: str,
        palette: Sequence[str],
        duration_s: float,
        out: Path,
    ) -> Path:
        store = LocalMediaStore(media_root())
        key = _digest("clip", source, scene_hash, list(palette), duration_s)
        stored = store.find_derived("chaos-clip", key)
        if stored is not None:
            shutil.copyfile(stored.path, out)
            return Path(out)
        made = original(self, scene_hash, prompt, palette, duration_s, out)
        store.remember_derived("chaos-clip", key, store.put_file(made, Path(made).suffix))
        return made

    ProceduralVisuals.generate = generate  # type: ignore[method-assign]
    ProceduralVisuals._chaos_memo = True  # type: ignore[attr-defined]


def _memoize_check_render() -> None:
    original = mdame_domain.probe.check_render
    source = _source_digest(mdame_domain.probe)

    def check_render(path: str, *args: Any, **kwargs: Any) -> list[str]:
        root = media_root() / "derived" / "chaos-check"
        marker = root / _digest("check", source, sha256_file(path), repr(args), repr(kwargs))
        if marker.exists():
            return json.loads(marker.read_text(encoding="utf-8"))
        problems = original(path, *args, **kwargs)
        root.mkdir(parents=True, exist_ok=True)
        temp = marker.with_name(f".{marker.name}.{os.getpid()}")
        temp.write_text(json.dumps(problems), encoding="utf-8")
        os.replace(temp, marker)
        return problems

    _replace_everywhere(original, check_render)


def _replace_everywhere(original: Callable[..., Any], replacement: Callable[..., Any]) -> None:
    """Every loaded mdame module that imported `original` by name gets `replacement`."""
    for name, module in list(sys.modules.items()):
        if not name.startswith("mdame_") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if value is original:
                setattr(module, attr, replacement)


if __name__ == "__main__":
    sys.exit(run_child(sys.argv[1]))
