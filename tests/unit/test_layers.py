"""The project's packages form layers, and a module imports only from its own layer and those
below it (function-level imports count too):

    mdame_core.settings < mdame_domain < mdame_core < mdame_resources < mdame_pipeline
        < mdame_runtime < mdame_assets < mdame_cli

mdame_core's settings sit below the domain (its rules read their defaults from them), while the
rest of mdame_core (the log lines, the state client) uses the domain's redaction, timing and
credentials. mdame_runtime runs the Dagster definitions (step runtime, executors, run server,
liveness sweep); mdame_assets holds the definitions, which use it; the command line is on top.
A module belongs to the layer of the longest name that prefixes it."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
LAYERS = (
    "mdame_core.settings",
    "mdame_domain",
    "mdame_core",
    "mdame_resources",
    "mdame_pipeline",
    "mdame_runtime",
    "mdame_assets",
    "mdame_cli",
)
PACKAGES = sorted({layer.split(".")[0] for layer in LAYERS})


def layer_of(module: str) -> int | None:
    """The index in LAYERS of the longest layer name that is `module` or a parent of it."""
    found = [
        (len(name), index)
        for index, name in enumerate(LAYERS)
        if module == name or module.startswith(name + ".")
    ]
    return max(found)[1] if found else None


def module_name(root: Path, path: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def imported(tree: ast.AST, root: Path) -> set[str]:
    """Absolute module names a module imports; `from package import module` names the module."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            base = root.joinpath(*node.module.split("."))
            for alias in node.names:
                sub = base / alias.name
                is_module = sub.with_suffix(".py").is_file() or (sub / "__init__.py").is_file()
                names.add(f"{node.module}.{alias.name}" if is_module else node.module)
    return names


def layer_breaches(root: Path) -> list[str]:
    breaches = []
    for package in PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            name = module_name(root, path)
            own = layer_of(name)
            assert own is not None, name
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for target in sorted(imported(tree, root)):
                theirs = layer_of(target)
                if theirs is not None and theirs > own:
                    breaches.append(
                        f"{path.relative_to(root)} ({LAYERS[own]}) imports {target} "
                        f"({LAYERS[theirs]}, a layer above it)"
                    )
    return breaches


def test_every_package_imports_only_its_own_layer_and_those_below() -> None:
    assert all((REPO / package / "__init__.py").is_file() for package in PACKAGES)
    breaches = layer_breaches(REPO)
    assert not breaches, "\n".join(breaches)


def test_a_planted_upward_import_is_found(tmp_path: Path) -> None:
    for package in PACKAGES:
        (tmp_path / package).mkdir()
        (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / "mdame_core" / "settings").mkdir()
    (tmp_path / "mdame_core" / "settings" / "__init__.py").write_text("")
    (tmp_path / "mdame_runtime" / "step.py").write_text("X = 1\n")
    (tmp_path / "mdame_assets" / "jobs.py").write_text("from mdame_runtime.step import X\n")
    (tmp_path / "mdame_domain" / "rules.py").write_text("from mdame_core import settings\n")
    assert layer_breaches(tmp_path) == []

    # The runtime reaching up into the definitions, inside a function as well.
    (tmp_path / "mdame_runtime" / "step.py").write_text(
        "def f():\n    from mdame_assets import jobs\n"
    )
    # The domain using the state client rather than the settings.
    (tmp_path / "mdame_domain" / "rules.py").write_text("import mdame_core.state\n")
    assert layer_breaches(tmp_path) == [
        "mdame_domain/rules.py (mdame_domain) imports mdame_core.state (mdame_core, a layer "
        "above it)",
        "mdame_runtime/step.py (mdame_runtime) imports mdame_assets.jobs (mdame_assets, a "
        "layer above it)",
    ]
