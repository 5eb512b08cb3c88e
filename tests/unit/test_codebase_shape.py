"""The shape a newcomer can carry: no product or test-server module over 600 lines, no class over
400, and comments that say why, never which issue or slice a line came from (that is git's job)."""

from __future__ import annotations

import ast
import os
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
MAX_MODULE_LINES, MAX_CLASS_LINES = 600, 400
HISTORY = re.compile(r"\b(issue|slice) [0-9]+", re.I)


def _modules(pattern: str = "mdame_*/**/*.py") -> list[Path]:
    return sorted(p for p in REPO.glob(pattern) if "__pycache__" not in p.parts)


def _too_long(paths: list[Path]) -> list[str]:
    found = []
    for path in paths:
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            found.append(f"{path.relative_to(REPO)}: {lines} lines")
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                if length > MAX_CLASS_LINES:
                    found.append(f"{path.relative_to(REPO)}: class {node.name} {length} lines")
    return found


def test_no_module_or_class_is_too_long_to_read() -> None:
    too_long = _too_long(_modules())
    assert not too_long, "split by concern: " + "; ".join(too_long)


def test_the_test_servers_follow_the_same_rule() -> None:
    fakes = _modules("fakes/**/*.py")
    # Every fakes module, the split servers' packages too, with no exception.
    assert {"gemini", "stock_common", "youtube"} <= {p.parent.name for p in fakes}
    too_long = _too_long(fakes)
    assert not too_long, "split by concern: " + "; ".join(too_long)


def test_comments_do_not_name_issues_or_slices() -> None:
    found = [
        f"{path.relative_to(REPO)}:{number}"
        for path in _modules()
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if HISTORY.search(line)
    ]
    assert not found, "history belongs in git: " + ", ".join(found)


def test_the_checks_find_a_long_module_and_an_issue_reference(tmp_path) -> None:
    long_module = "class Big:\n" + "    x = 1\n" * (MAX_CLASS_LINES + 1)
    tree = ast.parse(long_module)
    (big,) = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    assert big.end_lineno is not None and big.end_lineno - big.lineno + 1 > MAX_CLASS_LINES
    assert HISTORY.search("# added for issue 12") and HISTORY.search("# Slice 3 of the plan")
    assert not HISTORY.search("# a str slice cuts between code points")


def test_loading_the_definitions_does_not_import_the_gemini_sdk() -> None:
    """Every code server, run worker and Celery step loads the definitions; google-genai costs
    most of a second to import, and only a step that makes a Gemini client needs it."""
    import subprocess
    import sys

    probe = (
        "import sys, mdame_assets.orchestrator, mdame_assets.gpu; "
        "print(sorted(m for m in sys.modules if m.startswith('google.genai')))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True, text=True, timeout=120, env={**os.environ, "ENV": "dev"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]", done.stdout
