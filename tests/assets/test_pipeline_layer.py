"""mdame_pipeline sits between the definitions and the resources: of the project's packages it
imports mdame_domain, mdame_core and mdame_resources only, never the Dagster definitions
(mdame_assets) nor the command line above them."""

from __future__ import annotations

import ast

from mdame_core.settings import REPO_ROOT

ALLOWED = {"mdame_domain", "mdame_core", "mdame_resources", "mdame_pipeline"}


def _imported(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_pipeline_imports_no_package_above_it() -> None:
    modules = sorted((REPO_ROOT / "mdame_pipeline").rglob("*.py"))
    assert modules, "no mdame_pipeline package"
    wrong = [
        f"{path.relative_to(REPO_ROOT)} imports {name}"
        for path in modules
        for name in sorted(_imported(ast.parse(path.read_text(encoding="utf-8"))))
        if name.split(".")[0].startswith("mdame_") and name.split(".")[0] not in ALLOWED
    ]
    assert not wrong, "\n".join(wrong)
