"""`mdame models pull|check`: the diffusers weights in the local model directory.

Generation loads models only from $MDAME_MODEL_DIR (default $MDAME_HOME/models), one folder per
hub id, with local_files_only; `pull` is the one command that downloads (huggingface_hub's
snapshot_download, online), and `check` says what is there, its size, and which dimensions
need what, failing when an active dimension's model is missing.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mdame_core import settings
from mdame_domain.diffusion import ENGINES, check_model_id, select_model_files
from mdame_domain.dimensions import load_registry

if TYPE_CHECKING:
    from mdame_resources.providers.visuals import DiffusersVisuals

_WEIGHT_SUFFIXES = (".safetensors", ".bin")


class ModelsError(RuntimeError):
    pass


def _visuals() -> DiffusersVisuals:
    # Imported here: the providers pull in Dagster, which other `mdame` commands do without.
    from mdame_resources.providers.selection import diffusers_visuals

    return diffusers_visuals()


def _dimensions_dir(args: argparse.Namespace) -> Path:
    return Path(args.dimensions) if args.dimensions else settings.dimensions_dir()


def needed_models(visuals: DiffusersVisuals, folder: Path) -> dict[str, dict[str, list[str]]]:
    """model id -> {"engines": [...], "dimensions": [active dimensions that need it]}, for
    both engines (a model no active dimension uses is listed with no dimensions)."""
    registry = load_registry(folder)
    needs: dict[str, dict[str, list[str]]] = {}
    for engine in ENGINES:
        users = [d.slug for d in registry.dimensions if d.active and d.visuals.engine == engine]
        for model_id in visuals.models_for(engine):
            entry = needs.setdefault(model_id, {"engines": [], "dimensions": []})
            entry["engines"].append(engine)
            entry["dimensions"].extend(u for u in users if u not in entry["dimensions"])
    return needs


def model_status(path: Path) -> tuple[str, int]:
    """("present" | "incomplete" | "missing", bytes on disk) of one model folder."""
    if not path.is_dir():
        return "missing", 0
    files = [p for p in path.rglob("*") if p.is_file() and not p.is_symlink()]
    size = sum(p.stat().st_size for p in files)
    has_config = (path / "model_index.json").is_file() or (path / "config.json").is_file()
    has_weights = any(p.name.endswith(_WEIGHT_SUFFIXES) for p in files)
    return ("present" if has_config and has_weights else "incomplete"), size


def _size(n: int) -> str:
    value = float(n)
    for unit in ("B", "KB", "MB", "GB"):
        if value < 1024 or unit == "GB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} GB"


def check(args: argparse.Namespace) -> int:
    visuals = _visuals()
    root = visuals.model_root()
    needs = needed_models(visuals, _dimensions_dir(args))
    print(f"model directory: {root} ($MDAME_MODEL_DIR, default $MDAME_HOME/models)")
    print(f"{'MODEL':<48} {'ENGINE':<12} {'STATUS':<11} {'SIZE':>9}  DIMENSIONS")
    missing = []
    for model_id, entry in needs.items():
        status, size = model_status(root / model_id)
        users = entry["dimensions"]
        if users and status != "present":
            missing.append(model_id)
        print(
            f"{model_id:<48} {','.join(entry['engines']):<12} {status:<11} {_size(size):>9}  "
            f"{', '.join(users) or '-'}"
        )
    if missing:
        print(
            f"missing: {', '.join(missing)} (needed by active dimensions); "
            "run `mdame models pull` where the hub is reachable"
        )
        return 1
    print("every model an active dimension needs is present")
    return 0


def _wanted(args: argparse.Namespace, needs: dict[str, dict[str, list[str]]]) -> list[str]:
    if args.model:
        return [check_model_id(m) for m in args.model]
    if args.engine:
        return [m for m, e in needs.items() if args.engine in e["engines"]]
    if args.all:
        return list(needs)
    return [m for m, e in needs.items() if e["dimensions"]]


def _hub_error(model_id: str, exc: BaseException) -> ModelsError:
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    return ModelsError(
        f"cannot pull {model_id!r} from the Hugging Face hub ({type(exc).__name__}: {first}); "
        "pull on a machine that reaches the hub (gated models such as SVD need HF_TOKEN and "
        "the licence accepted) and copy the model directory over"
    )


def _require_hub(endpoint: str, model_id: str) -> None:
    """One quick request first: huggingface_hub retries a refused connection with backoff for
    about half a minute per call, while an unreachable hub is the common failure here."""
    import httpx

    try:
        httpx.get(f"{endpoint}/api/models/{model_id}", timeout=10.0)
    except httpx.TransportError as exc:
        raise ModelsError(
            f"cannot pull {model_id!r}: the Hugging Face hub at {endpoint} is unreachable "
            f"({type(exc).__name__}); pull on a machine that reaches it and copy the model "
            "directory over, or set HF_ENDPOINT to a mirror"
        ) from None


def pull_model(model_id: str, root: Path) -> Path:
    """Downloads one model into root/<model id>: the files a diffusers load uses (see
    select_model_files), resumable, idempotent (present files are kept)."""
    from huggingface_hub import HfApi, constants, snapshot_download

    target = root / model_id
    if constants.HF_HUB_OFFLINE:
        raise ModelsError(
            f"cannot pull {model_id!r}: HF_HUB_OFFLINE is set (the hub is off limits here); "
            "unset it where the hub is reachable"
        )
    _require_hub(constants.ENDPOINT, model_id)
    try:
        files = HfApi().list_repo_files(model_id)
        snapshot_download(
            repo_id=model_id, local_dir=target, allow_patterns=select_model_files(files)
        )
    except Exception as exc:  # noqa: BLE001 - every hub failure becomes one clear line
        raise _hub_error(model_id, exc) from exc
    return target


def pull(args: argparse.Namespace) -> int:
    visuals = _visuals()
    root = visuals.model_root()
    wanted = _wanted(args, needed_models(visuals, _dimensions_dir(args)))
    if not wanted:
        print("no active dimension needs a model (use --all or --engine)")
        return 0
    root.mkdir(parents=True, exist_ok=True)
    for model_id in wanted:
        print(f"pulling {model_id} -> {root / model_id}", flush=True)
        path = pull_model(model_id, root)
        status, size = model_status(path)
        print(f"  {status}, {_size(size)}")
    return 0


def add_parsers(groups: Any) -> None:
    models = groups.add_parser("models", help="diffusers weights in the model directory")
    commands = models.add_subparsers(dest="command", required=True)
    for name, func, text in (
        ("pull", pull, "download the models the active dimensions need (online)"),
        ("check", check, "what is present, its size, which dimensions need what"),
    ):
        cmd = commands.add_parser(name, help=text)
        cmd.add_argument("--dimensions", help="dimension folder (default: dimensions/)")
        if name == "pull":
            which = cmd.add_mutually_exclusive_group()
            which.add_argument("--engine", choices=ENGINES, help="only this engine's models")
            which.add_argument("--model", action="append", help="this hub id (repeatable)")
            which.add_argument("--all", action="store_true", help="both engines' models")
        cmd.set_defaults(func=func)
