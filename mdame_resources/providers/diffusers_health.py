"""The diffusers engine's health check (what `mdame doctor` prints for DiffusersVisuals): the
model folders that the engines of the active dimensions whose visuals.chain has diffusers need
(models_for(visuals.engine) under model_root()), looked at as a generation loads them, with
local_files_only: the folder, its model_index.json (a pipeline) or config.json (a model) read
as JSON, the component folders the index names, and weights. Neither torch nor diffusers is
imported and nothing is downloaded. With no active dimension's chain having diffusers, nothing
needs a model: one SKIP.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from mdame_domain.doctor import Status
from mdame_domain.visuals_chain import DIFFUSERS
from mdame_resources.health import Health, HealthScope

if TYPE_CHECKING:
    from mdame_domain.dimensions import DimensionConfig
    from mdame_resources.providers.visuals import DiffusersVisuals

# What a folder's weights are stored as (`mdame models pull` takes these).
WEIGHT_SUFFIXES = (".safetensors", ".bin")
INDEX, CONFIG = "model_index.json", "config.json"


def diffusers_users(
    resource: DiffusersVisuals, dimensions: Sequence[DimensionConfig]
) -> dict[str, list[tuple[str, str]]]:
    """Each model id -> (dimension, engine) pairs, for the dimensions whose chain has
    diffusers, in load order."""
    needed: dict[str, list[tuple[str, str]]] = {}
    for dim in dimensions:
        if DIFFUSERS not in dim.visuals.chain:
            continue
        engine = resource.engine_for(dim.visuals.engine)
        for model_id in resource.models_for(engine):
            needed.setdefault(model_id, []).append((dim.slug, engine))
    return needed


def folder_problem(path: Path) -> str | None:
    """What keeps a generation from loading the model folder `path`; None when nothing."""
    if not path.is_dir():
        return f"{path} is missing"
    index = path / INDEX if (path / INDEX).is_file() else None
    chosen = index or (path / CONFIG if (path / CONFIG).is_file() else None)
    if chosen is None:
        return f"{path} has no {INDEX} or {CONFIG}"
    try:
        data = json.loads(chosen.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"{chosen} is not readable JSON ({type(exc).__name__})"
    if not isinstance(data, dict):
        return f"{chosen} is not a JSON object"
    if index is not None:
        # A pipeline's components: {"unet": ["diffusers", "UNet2DConditionModel"], ...};
        # [null, null] for one it ships without (a safety checker).
        missing = sorted(
            name
            for name, value in data.items()
            if not name.startswith("_")
            and isinstance(value, list)
            and value[:1] != [None]
            and not (path / name).is_dir()
        )
        if missing:
            return f"{path} lacks the component folders its {INDEX} names: {', '.join(missing)}"
    if not any(p.name.endswith(WEIGHT_SUFFIXES) and p.is_file() for p in path.rglob("*")):
        return f"{path} has no weights (*{' or *'.join(WEIGHT_SUFFIXES)})"
    return None


def diffusers_health(resource: DiffusersVisuals, scope: HealthScope | None) -> list[Health]:
    """One finding per model folder an active dimension needs (its subject the model id)."""
    from mdame_resources.providers.diffusers_visuals import PULL_HINT, model_path

    try:
        needed = diffusers_users(resource, scope.dimensions if scope else ())
    except ValueError as exc:  # a model id or engine in the resource's settings
        return [Health(Status.FAIL, str(exc))]
    if not needed:
        message = "no active dimension's visuals.chain has diffusers: no model folder to check"
        return [Health(Status.SKIP, message)]
    root = resource.model_root()
    found = []
    for model_id, users in needed.items():
        path = model_path(root, model_id)
        by = ", ".join(f"{slug} (visuals.engine {engine})" for slug, engine in users)
        problem = folder_problem(path)
        if problem is None:
            found.append(Health(Status.OK, f"{path} is loadable; needed by {by}", model_id))
        else:
            message = f"{problem}; needed by {by}: {PULL_HINT}"
            found.append(Health(Status.FAIL, message, model_id))
    return found
